"""DESIGN invariants, exact (CPU fp32): every expert's runs depend on the pair's content only.

A pair and its swap under any ids mirror bit for bit (u -> 1 - u, orders exchanged), duplicates
agree, and a permuted, re-labelled batch of the same contents gives the same runs, for every
expert: single-pass, derived, greedy, sampled and native. Through the bank, the CLI and Judge;
the seeds through the vLLM backend's seeded path with a stand-in for vllm."""
import json
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from baer_fast import protocols
from baer_fast.io.records import Pair, read_signals, swap_runs, write_pairs
from baer_fast.bank.generative import GenerationConfig
from baer_fast.runtime.seeds import sample_seed

MODEL_SEED = 2          # own_model_dir (tests/invariants/conftest.py)
BUDGET = 4
GEN = GenerationConfig(max_new_tokens={n: BUDGET for n in protocols.GENERATIVE}, seed=5)
BASE = [Pair("p0", "what is the sum of a list?", "the sum is 10", "it returns a list", split="selection"),
        Pair("p1", "is the code correct?", "no", "yes the python code returns the sum", split="selection"),
        Pair("p2", "explain why", "because the answer is correct", "")]


@pytest.fixture(scope="module")
def reference(own_engine):
    from baer_fast.bank.runner import RunReport, run_experts
    rep = RunReport()
    sig = run_experts(own_engine, BASE, experts=list(protocols.ALL), generation=GEN, report=rep)
    return {s.id: s.experts for s in sig}, rep.derived_params


def _expected(ref, k: int, flipped: bool) -> dict:
    runs = ref[f"p{k}"]
    return {n: swap_runs(r) for n, r in runs.items()} if flipped else runs


def _variant(k: int, flipped: bool, pid: str) -> Pair:
    p = BASE[k]
    return Pair(pid, p.question, *((p.response_b, p.response_a) if flipped else (p.response_a, p.response_b)))


def test_the_seed_is_keyed_by_what_the_model_sees():
    ids = (5, 6, 7)
    assert sample_seed(0, "self_consistency", 1, ids) == sample_seed(0, "self_consistency", 1, list(ids))
    others = {sample_seed(1, "self_consistency", 1, ids), sample_seed(0, "cot", 1, ids),
              sample_seed(0, "self_consistency", 2, ids), sample_seed(0, "self_consistency", 1, (5, 6, 8))}
    assert sample_seed(0, "self_consistency", 1, ids) not in others and len(others) == 4


def test_every_expert_and_its_native_twin_is_there(reference):
    ref, _ = reference
    assert set(ref["p0"]) == set(protocols.ALL)
    assert all(u in (None, 0.0, 0.5, 1.0) for n in protocols.NATIVE for u in ref["p0"][n])


@pytest.mark.slow
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(order=st.permutations(range(3)), flips=st.lists(st.booleans(), min_size=3, max_size=3),
       dups=st.lists(st.tuples(st.integers(0, 2), st.booleans()), max_size=2), seed=st.integers(0, 99))
def test_swaps_duplicates_ids_and_order_change_no_bit(own_engine, reference, order, flips, dups, seed):
    from baer_fast.bank.runner import run_experts
    ref, params = reference
    items = [(k, flips[k]) for k in order] + dups
    rng = random.Random(seed)
    rng.shuffle(items)
    batch = [_variant(k, f, f"id-{rng.random()}") for k, f in items]
    got = run_experts(own_engine, batch, experts=list(protocols.ALL), generation=GEN, derived_params=params)
    for (k, f), sig in zip(items, got):
        assert sig.experts == _expected(ref, k, f)             # exact, every expert


@pytest.mark.slow
def test_the_cli_gives_the_same_bits_for_a_shuffled_relabelled_swapped_file(own_model_dir, reference, tmp_path):
    from baer_fast.cli import main
    ref, params = reference
    items = [(k, f) for k in range(3) for f in (False, True)] + [(1, False)]
    random.Random(3).shuffle(items)
    pairs = tmp_path / "pairs.jsonl"
    write_pairs(str(pairs), [_variant(k, f, f"c{i}") for i, (k, f) in enumerate(items)])
    (tmp_path / "params.json").write_text(json.dumps(params))
    assert main(["-q", "experts", "--model", own_model_dir, "--input", str(pairs), "--out", str(tmp_path / "s.jsonl"),
                 "--experts", "all", "--max-new-tokens", str(BUDGET), "--seed", "5", "--chunk-pairs", "3",
                 "--derived-params", str(tmp_path / "params.json"), "--kernels", "torch"]) == 0
    by_id = {s.id: s.experts for s in read_signals(str(tmp_path / "s.jsonl"))}
    for i, (k, f) in enumerate(items):          # one chunk of the same three contents: the bank's bits
        assert by_id[f"c{i}"] == _expected(ref, k, f)


@pytest.fixture(scope="module")
def judge(own_engine, reference):
    from baer_fast.api import Judge
    from baer_fast.bank.runner import run_experts
    from baer_fast.selection.fit import fit_condition
    _, params = reference
    names = list(protocols.SINGLE_PASS)           # Judge decodes with its default budgets: keep it single-pass
    train = run_experts(own_engine, [_variant(k % 3, bool(k % 2), f"t{k}") for k in range(6)], experts=names,
                        derived_params=params)
    train = [s.__class__(f"{s.id}-{j}", s.experts, label="ab"[(i + j) % 2], split=("selection", "calibration")[j])
             for i, s in enumerate(train) for j in range(2)]
    art = fit_condition(train, condition="inv")
    art["derived_params"] = params
    return Judge(own_engine, art)


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(order=st.permutations(range(3)), flips=st.lists(st.booleans(), min_size=3, max_size=3),
       dups=st.lists(st.tuples(st.integers(0, 2), st.booleans()), max_size=2))
def test_judge_scores_a_permuted_batch_as_the_permutation(judge, order, flips, dups):
    import torch

    from tests.fixtures.tolerances import HEAD_OPS, fp64_tol
    q, a, b = zip(*[(p.question, p.response_a, p.response_b) for p in BASE])
    s, sig = judge.score(q, a, b), judge.signals(q, a, b)
    items = [(k, flips[k]) for k in order] + dups
    batch = [_variant(k, f, "-") for k, f in items]
    args = [[getattr(p, f) for p in batch] for f in ("question", "response_a", "response_b")]
    got, got_sig = judge.score(*args), judge.signals(*args)
    for j, (k, f) in enumerate(items):
        want = {n: swap_runs(r) for n, r in sig[k].experts.items()} if f else sig[k].experts
        assert got_sig[j].experts == want                               # runs: exact, both ways
        if f:      # the float64 head negates the mirrored record up to its own rounding
            assert abs(float(got[j] + s[k])) <= fp64_tol(HEAD_OPS, 1 + float(s.abs().max()))
        else:
            assert torch.equal(got[j], s[k])                            # scores: the permutation, exactly
