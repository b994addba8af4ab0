"""A cascade's stage 2 computes only what stage 1 did not: a derived expert reads stage 1's source runs
(direct's prompts are not prefilled again), a native verdict is not generated again, and the cascade's
report counts every token the engine and decoder ran, once."""
from __future__ import annotations

import numpy as np
import pytest

from baer_fast.bank import runner
from baer_fast.io.records import Pair

QS = ["Which is prime, 7 or 8?", "Explain why the sum is even.", "Which is prime, 7 or 8?"]
PAIRS = [Pair(f"c{i}", QS[i % 3], f"answer {i} is seven", f"response {i * 3} is eight because", label="ab"[i % 2],
              split=("selection", "calibration")[i % 2]) for i in range(12)]
PRIDE = {"pride": {"method": "pride", "source": "direct", "prior": [0.3, 0.7], "n_fit": 6}}   # not a fit: read as given


def _art(model, full, stage1, gen=None):
    """A two-stage head over `full` whose stage 1 runs `stage1`; half the pairs exit."""
    from baer_fast.bank.runner import resolve_experts, run_experts
    from baer_fast.selection.budget import fit_stack
    sig = run_experts(model, PAIRS, experts=full, generation=gen, derived_params=PRIDE, batch_invariant=True)
    names, y = list(sig[0].experts), np.array([1.0 if s.label == "a" else -1.0 for s in sig])
    head, _ = fit_stack(sig, y, [s.split for s in sig], experts=names, categories=["default"])
    s1, _ = fit_stack(sig, y, [s.split for s in sig], experts=resolve_experts(stage1), categories=["default"])
    conf = np.sort(np.round(np.abs(s1.score(sig)), 9))
    return {"condition": "c", "head": "stack", "experts": names, "heads": {"stack": head.to_json()},
            "derived_params": PRIDE, "cascade": {"stage1": s1.to_json(), "stage1_experts": list(stage1),
                                                 "tau": float((conf[5] + conf[6]) / 2)}}


def _calls(monkeypatch):
    """Every bank computation (runner.expert_rows): its pairs, experts, and the tokens it prefilled / decoded."""
    from baer_fast.bank import runner
    real, calls = runner.expert_rows, []

    def counted(engine, pairs, names, report, generation=None, **kw):
        g0 = report.generative
        before = (report.stats.tokens_prefilled + (g0.decode_prefilled or 0 if g0 else 0),
                  sum(c.tokens_decoded for c in g0.cost.values()) if g0 else 0)
        rows = real(engine, pairs, names, report, generation, **kw)
        g = report.generative
        after = (report.stats.tokens_prefilled + (g.decode_prefilled or 0 if g else 0),
                 sum(c.tokens_decoded for c in g.cost.values()) if g else 0)
        calls.append((len(pairs), list(names), after[0] - before[0], after[1] - before[1]))
        return rows
    monkeypatch.setattr(runner, "expert_rows", counted)
    return calls


REAL_ROWS = runner.expert_rows       # the unwrapped bank, for spies set up more than once in a test


def _pair_calls(monkeypatch, fail_at=None):
    """Every bank computation (runner.expert_rows): (its pairs, experts, tokens prefilled); the call
    numbered fail_at raises instead (a run stopped there)."""
    calls = []

    def spy(engine, pairs, names, report, generation=None, **kw):
        if len(calls) == fail_at:
            raise RuntimeError("stopped between a chunk's stages")
        before = report.stats.tokens_prefilled
        rows = REAL_ROWS(engine, pairs, names, report, generation, **kw)
        calls.append((list(pairs), list(names), report.stats.tokens_prefilled - before))
        return rows
    monkeypatch.setattr(runner, "expert_rows", spy)
    return calls


def _judge(model, art, gen=None):
    from baer_fast.api import Judge, JudgeOptions
    from baer_fast.runtime.open import open_engine
    j = Judge(open_engine(model), art, options=JudgeOptions(batch_invariant=True, generation=gen))
    recs = j.signals([p.question for p in PAIRS], [p.response_a for p in PAIRS], [p.response_b for p in PAIRS])
    return j, recs


def test_stage_two_reads_pride_from_stage_one_direct(qwen_dir, monkeypatch):
    from baer_fast.bank.runner import apply_derived
    art = _art(qwen_dir, ["direct", "score", "pride"], ["direct"])
    calls = _calls(monkeypatch)
    j, recs = _judge(qwen_dir, art)
    open_ = [i for i, r in enumerate(recs) if "score" in r.experts]
    assert len(open_) == 6
    # stage 2 prefills score's prompts only: pride is read from stage 1's direct runs
    assert [(n, names) for n, names, _, _ in calls] == [(12, ["direct"]), (6, ["score"])]
    for i in open_:
        r = recs[i]
        assert r.experts["pride"] == apply_derived(r.experts, ["pride"], PRIDE)["pride"]   # the head's params, bit for bit
        assert r.meta["expert_cost"]["pride"] == {"prefilled": 0, "decoded": 0, "seconds": 0.0, "from": "direct"}
    # the report charges each token the engine prefilled once (direct's are not charged to pride again)
    assert j.last_cascade["tokens_prefilled_per_pair"] * 12 == pytest.approx(sum(c[2] for c in calls), abs=1e-9)


def test_stage_one_keeps_the_source_of_its_derived_expert(qwen_dir, monkeypatch):
    """Stage 1 = pride (direct's prompts run for it), the full head also uses direct: stage 1 keeps
    direct's runs, at no cost, so stage 2 prefills score's prompts only (before: direct's again)."""
    art = _art(qwen_dir, ["direct", "score", "pride"], ["pride"])
    calls = _calls(monkeypatch)
    j, recs = _judge(qwen_dir, art)
    assert [(n, sorted(names)) for n, names, _, _ in calls] == [(12, ["direct", "pride"]), (6, ["score"])]
    assert all("direct" in r.experts for r in recs)
    assert {r.meta["expert_cost"]["pride"]["prefilled"] for r in recs} == {0}    # charged to direct, once
    assert j.last_cascade["tokens_prefilled_per_pair"] * 12 == pytest.approx(sum(c[2] for c in calls), abs=1e-9)


def test_stage_two_of_derived_experts_only_runs_nothing_and_scores_as_before(qwen_dir, monkeypatch):
    """Stage 2 = pride alone: no second bank call; runs and scores bit for bit those of the old path
    (pride on direct recomputed for the open pairs, in calls of the same shapes as stage 1's)."""
    from baer_fast import artifact
    from baer_fast.bank.runner import run_experts
    from baer_fast.runtime.open import open_engine
    from baer_fast.selection.cascade import merge
    art = _art(qwen_dir, ["direct", "pride"], ["direct"])
    calls = _calls(monkeypatch)
    j, recs = _judge(qwen_dir, art)
    assert [(n, names) for n, names, _, _ in calls] == [(12, ["direct"])]
    engine = open_engine(qwen_dir)
    first = run_experts(engine, PAIRS, experts=["direct"], batch_invariant=True)
    open_ = [i for i, r in enumerate(recs) if "pride" in r.experts]
    old = dict(enumerate(first))
    for i, rec in zip(open_, run_experts(engine, [PAIRS[i] for i in open_], experts=["pride"], derived_params=PRIDE,
                                         batch_invariant=True)):
        old[i] = merge(first[i], rec)
    old = [old[i] for i in range(len(PAIRS))]
    assert [r.experts for r in recs] == [r.experts for r in old]
    head = artifact.deployed_head(art)
    assert head.score(recs).tolist() == head.score(old).tolist()
    assert j.last_cascade["tokens_prefilled_per_pair"] * 12 == pytest.approx(calls[0][2], abs=1e-9)


def test_a_native_verdict_from_stage_one_is_not_generated_again(qwen_dir, monkeypatch):
    """Stage 1 = cot_native (its cot generations run with it); stage 2 of cot + direct decodes nothing,
    and the report's decoded tokens are the decoder's own count (stage 1's cot cells kept, not replaced)."""
    from baer_fast.bank.generative import GenerationConfig
    gen = GenerationConfig(max_new_tokens={"cot": 6})
    art = _art(qwen_dir, ["cot", "direct"], ["cot_native"], gen)
    calls = _calls(monkeypatch)
    j, recs = _judge(qwen_dir, art, gen)
    assert [(n, names) for n, names, _, _ in calls] == [(12, ["cot", "cot_native"]), (6, ["direct"])]
    assert calls[1][3] == 0 and calls[0][3] > 0
    assert j.last_cascade["tokens_decoded_per_pair"] * 12 == pytest.approx(sum(c[3] for c in calls), abs=1e-9)
    assert j.last_cascade["tokens_prefilled_per_pair"] * 12 == pytest.approx(sum(c[2] for c in calls), abs=1e-9)


@pytest.mark.slow        # loads the tiny judge twice (the bank, then `score --model`)
def test_score_model_stage_two_reuses_stage_one_with_the_artifact_params(qwen_dir, tmp_path, monkeypatch):
    import json

    from baer_fast import artifact
    from baer_fast.bank.runner import apply_derived
    from baer_fast.cli import main
    from baer_fast.commands import stream
    opens, real_open = [], stream.open_from_args
    monkeypatch.setattr(stream, "open_from_args", lambda args: opens.append(1) or real_open(args))
    from baer_fast.io.records import read_signals, write_pairs
    from baer_fast.selection.cascade import merge
    path = str(tmp_path / "h.json")
    artifact.save(path, _art(qwen_dir, ["direct", "score", "pride"], ["direct"]))
    head = artifact.deployed_head(artifact.load(path))
    write_pairs(str(tmp_path / "p.jsonl"), PAIRS)
    calls = _calls(monkeypatch)
    out = str(tmp_path / "s.jsonl")
    assert main(["-q", "score", "--model", qwen_dir, "--input", str(tmp_path / "p.jsonl"), "--batch-invariant",
                 "--head", path, "--out", out]) == 0
    assert [(n, names) for n, names, _, _ in calls] == [(12, ["direct"]), (6, ["score"])]
    assert len(opens) == 1                      # one model load serves both stages
    first = read_signals(out + ".stage1.signals.jsonl")
    second = {s.id: s for s in read_signals(out + ".stage2.signals.jsonl")}
    assert len(second) == 6
    staged = [merge(r, second[r.id]) if r.id in second else r for r in first]
    for r in staged:
        if r.id in second:
            assert r.experts["pride"] == apply_derived(r.experts, ["pride"], PRIDE)["pride"]
            assert r.meta["expert_cost"]["pride"] == {"prefilled": 0, "decoded": 0, "from": "direct"}
    got = [json.loads(line)["score"] for line in open(out) if line.startswith("{\"id")]
    assert got == [float(x) for x in head.score(staged)]


def test_last_cascade_is_the_last_calls_report_even_when_it_was_empty_or_raised(qwen_dir, monkeypatch):
    """A reward loop logs `judge.last_cascade` after each call. After an empty batch, or a call that
    raised (bad input, an interrupt between the stages) it still held the call before's report, as if
    that call's pairs were this one's."""
    from baer_fast.errors import InputError
    from baer_fast.runtime.prefill import PrefixEngine
    j, _ = _judge(qwen_dir, _art(qwen_dir, ["direct", "score", "pride"], ["direct"]))
    assert j.last_cascade["pairs"] == 12
    j.score([], [], [])
    assert j.last_cascade["pairs"] == 0 and j.last_cascade["exited"] == 0
    j.score(QS[:1], ["a"], ["b"])
    assert j.last_cascade["pairs"] == 1
    with pytest.raises(InputError):
        j.score(QS[:2], ["a", 5], ["b", "c"])
    assert j.last_cascade is None
    j.score(QS[:1], ["a"], ["b"])
    real, seen = PrefixEngine.run, []

    def interrupted(self, *args, **kw):          # the call's second engine run is interrupted
        seen.append(1)
        if len(seen) == 2:
            raise KeyboardInterrupt
        return real(self, *args, **kw)
    monkeypatch.setattr(PrefixEngine, "run", interrupted)
    with pytest.raises(KeyboardInterrupt):
        j.score([p.question for p in PAIRS], [p.response_a for p in PAIRS], [p.response_b for p in PAIRS])
    assert j.last_cascade is None and len(seen) == 2
