"""DESIGN determinism, exact (CPU fp32) in the batch-invariant mode: a pair's runs do not depend
on the other pairs of its batch.

With `batch_invariant=True` each distinct content runs in engine and decoder calls of its own
(bank/runner._one_by_one), so a pair scored alone, beside other pairs (some asking its question),
in a shuffled batch, under other ids and swapped gives the same runs bit for bit, for every
expert: single-pass, derived (frozen parameters), greedy, sampled and native. Through the bank,
the `experts` CLI and `Judge.score`. The batched default is not exact here (tests of it bound the
rounding: tests/fixtures/tolerances.py)."""
import json
import random

import pytest

from baer_fast import protocols
from baer_fast.bank.generative import GenerationConfig
from baer_fast.io.records import Pair, read_signals, swap_runs, write_pairs

MODEL_SEED = 3          # own_model_dir (tests/invariants/conftest.py)
GEN = GenerationConfig(max_new_tokens={n: 4 for n in protocols.GENERATIVE}, seed=7)
MINE = [Pair("m0", "what is the sum of a list?", "the sum is 10", "it returns a list", split="selection"),
        Pair("m1", "explain why the code is correct", "because it returns the sum", "no")]
# other contents: one asks m0's question (batched, it would share m0's question prefix), the rest
# are of other lengths, so batching pads, chunks and groups m0 and m1 differently
OTHERS = [Pair("o0", "what is the sum of a list?", "a list of numbers and a much longer answer here", "10"),
          Pair("o1", "is the python code correct? compare both and explain why", "yes", "the function returns"),
          Pair("o2", "count the words", "three words here and then some more words to pad the row", "one")]


@pytest.fixture(scope="module")
def alone(own_engine):
    """Every expert's runs of each of MINE scored alone (derived parameters fitted once, frozen)."""
    from baer_fast.bank.runner import RunReport, run_experts
    rep = RunReport()
    run_experts(own_engine, MINE + OTHERS, experts=list(protocols.ALL), generation=GEN, report=rep)
    params = rep.derived_params
    runs = {p.id: run_experts(own_engine, [p], experts=list(protocols.ALL), generation=GEN, derived_params=params,
                              batch_invariant=True)[0].experts for p in MINE}
    return runs, params


def _variant(p: Pair, flipped: bool, pid: str) -> Pair:
    return Pair(pid, p.question, *((p.response_b, p.response_a) if flipped else (p.response_a, p.response_b)))


def _want(runs: dict, flipped: bool) -> dict:
    return {n: swap_runs(r) for n, r in runs.items()} if flipped else runs


@pytest.mark.parametrize("seed", [0, 1])
def test_a_pair_beside_other_pairs_gives_the_same_bits(own_engine, alone, seed):
    from baer_fast.bank.runner import run_experts
    runs, params = alone
    rng = random.Random(seed)
    items = [(k, rng.random() < 0.5) for k in range(len(MINE))]
    batch = [_variant(MINE[k], f, f"x{rng.random()}") for k, f in items] + OTHERS[:1 + seed * 2]
    order = list(range(len(batch)))
    rng.shuffle(order)
    got = run_experts(own_engine, [batch[i] for i in order], experts=list(protocols.ALL), generation=GEN,
                      derived_params=params, batch_invariant=True)
    by_pos = {i: sig for i, sig in zip(order, got)}
    for j, (k, f) in enumerate(items):
        assert by_pos[j].experts == _want(runs[MINE[k].id], f)         # exact, every expert


def test_the_cli_gives_a_pair_the_same_bits_in_any_file(own_model_dir, alone, tmp_path):
    from baer_fast.cli import main
    runs, params = alone
    (tmp_path / "params.json").write_text(json.dumps(params))
    files = {"alone": [_variant(MINE[0], False, "a0")],
             "beside": [_variant(MINE[0], True, "b0"), *OTHERS, _variant(MINE[1], False, "b1")]}
    random.Random(2).shuffle(files["beside"])
    got = {}
    for name, pairs in files.items():
        write_pairs(str(tmp_path / f"{name}.jsonl"), pairs)
        out = tmp_path / f"{name}.signals.jsonl"
        assert main(["-q", "experts", "--model", own_model_dir, "--input", str(tmp_path / f"{name}.jsonl"),
                     "--out", str(out), "--experts", "all", "--max-new-tokens", "4", "--seed", "7",
                     "--chunk-pairs", "4", "--derived-params", str(tmp_path / "params.json"),
                     "--kernels", "torch", "--batch-invariant"]) == 0
        got.update({s.id: s.experts for s in read_signals(str(out))})
    assert got["a0"] == runs["m0"]
    assert got["b0"] == _want(runs["m0"], True) and got["b1"] == runs["m1"]


def _judge(own_engine, params, **options):
    from baer_fast import artifact as artifact_io
    from baer_fast.api import Judge, JudgeOptions
    from baer_fast.heads.default import DefaultHead
    head = DefaultHead(experts=list(protocols.ALL))
    art = {**artifact_io.default_artifact(), "heads": {head.kind: head.to_json()}, "experts": list(protocols.ALL),
           "derived_params": params}
    return Judge(own_engine, art, options=JudgeOptions(generation=GEN, **options))


def test_judge_scores_a_pair_the_same_in_any_batch(own_engine, alone):
    import torch
    runs, params = alone
    judge = _judge(own_engine, params)
    assert judge.invariant                    # self_consistency in the head: on by default
    one = MINE[0]
    s_alone, sig = judge.score([one.question], [one.response_a], [one.response_b]), judge.signals(
        [one.question], [one.response_a], [one.response_b])
    assert sig[0].experts == runs["m0"]
    batch = [OTHERS[1], _variant(one, True, "-"), OTHERS[0], one, OTHERS[2]]
    args = [[getattr(p, f) for p in batch] for f in ("question", "response_a", "response_b")]
    got = judge.score(*args)
    assert torch.equal(got[3], s_alone[0])                               # exact, beside other pairs
    assert judge.signals(*args)[1].experts == _want(runs["m0"], True)    # and its swap mirrors exactly


def test_the_default_follows_the_head(own_engine, alone):
    """On by default where a sampled expert is in the head, off for the single-pass default head."""
    from baer_fast.api import Judge
    from baer_fast.artifact import default_artifact
    _, params = alone
    assert _judge(own_engine, params).invariant
    assert not _judge(own_engine, params, batch_invariant=False).invariant
    assert not Judge(own_engine, default_artifact()).invariant


def test_the_mode_is_refused_on_vllm():
    """vLLM's prefix cache reuses KV computed in earlier calls, beside other pairs: refused loudly."""
    from baer_fast.bank.runner import RunReport, expert_rows
    from baer_fast.errors import BaerError

    class VllmLike:
        kind = "vllm"
    with pytest.raises(BaerError, match="hf backend"):
        expert_rows(VllmLike(), MINE, ["direct"], RunReport(), batch_invariant=True)
