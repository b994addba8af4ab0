"""`score --model` with a cascade head runs the stages chunk by chunk, stage 2 reading the prompt-prefix
KV stage 1 computed for the chunk's open pairs (commands/stream.stream_staged): exactly those tokens are
not prefilled again, the runs equal the uncached ones within fp32 rounding, and a run stopped between a
chunk's two stages resumes to the uninterrupted run's bits (stage 1 of that chunk runs again for its KV)."""
from __future__ import annotations

import contextlib
import json

import pytest

from baer_fast.bank import prefix_store
from tests.bank.test_cascade_reuse import PAIRS, _art, _pair_calls
from tests.bank.test_prefix_store import _prefix_tokens


@pytest.fixture(scope="module")
def head(qwen_dir, tmp_path_factory):
    from baer_fast import artifact
    from baer_fast.io.records import write_pairs
    d = tmp_path_factory.mktemp("cascade_kv")
    write_pairs(str(d / "p.jsonl"), PAIRS)
    artifact.save(str(d / "h.json"), _art(qwen_dir, ["direct", "score", "pride"], ["direct"]))
    return d


def _score(model, d, out):
    from baer_fast.cli import main
    assert main(["-q", "score", "--model", model, "--input", str(d / "p.jsonl"), "--head", str(d / "h.json"),
                 "--out", str(out), "--chunk-pairs", "4", "--kernels", "torch"]) == 0
    from baer_fast.io.records import read_signals
    scores = [json.loads(x) for x in open(out) if x.startswith('{"id"')]
    return scores, read_signals(str(out) + ".stage1.signals.jsonl"), read_signals(str(out) + ".stage2.signals.jsonl")


def test_stage_two_reads_each_chunks_prefixes_and_equals_the_uncached_run(qwen_dir, head, monkeypatch):
    from baer_fast.runtime.open import open_engine
    from tests.fixtures.checks import max_run_diff
    from tests.fixtures.tolerances import naive_run_error, paths_tol
    calls = _pair_calls(monkeypatch)
    scores, first, second = _score(qwen_dir, head, head / "kv.jsonl")
    kv_calls = list(calls)
    calls.clear()
    monkeypatch.setattr(prefix_store, "keeping", lambda engine: contextlib.nullcontext())
    plain_scores, plain_first, plain_second = _score(qwen_dir, head, head / "plain.jsonl")
    # three content chunks of 4: stage 1 on each, then stage 2 on the chunk's open pairs
    assert [(len(p), n) for p, n, _ in kv_calls] == [(len(p), n) for p, n, _ in calls]
    assert [n for _, n, _ in kv_calls] == [["direct"], ["score"]] * 3 and sum(len(p) for p, _, _ in calls[1::2]) == 6
    assert [c[2] for c in kv_calls[::2]] == [c[2] for c in calls[::2]]           # stage 1 prefills what it did
    loaded = open_engine(qwen_dir).loaded
    for (pairs, _, kept), (_, _, again) in zip(kv_calls[1::2], calls[1::2]):
        assert again - kept == _prefix_tokens(loaded, pairs) > 0                  # each open prefix once
    assert [s.id for s in second] == [s.id for s in plain_second]
    tol = paths_tol(naive_run_error(loaded, PAIRS, ["direct", "score"]))
    assert max_run_diff(second, plain_second, ["score", "pride"]) <= tol
    assert [s.experts for s in first] == [s.experts for s in plain_first]          # stage 1 keeps nothing out
    assert [s["id"] for s in scores] == [s["id"] for s in plain_scores] == [p.id for p in PAIRS]


def test_a_run_stopped_between_a_chunks_stages_resumes_to_the_same_bits(qwen_dir, head, monkeypatch):
    whole, _, _ = _score(qwen_dir, head, head / "whole.jsonl")
    calls = _pair_calls(monkeypatch, fail_at=3)            # chunk 2's stage 2: its stage 1 is already in the file
    with pytest.raises(RuntimeError, match="between a chunk's stages"):
        _score(qwen_dir, head, head / "stopped.jsonl")
    assert [n for _, n, _ in calls] == [["direct"], ["score"], ["direct"]]
    stage1 = [json.loads(x)["id"] for x in open(head / "stopped.jsonl.stage1.signals.jsonl") if '"id"' in x]
    assert len(stage1) == 8                         # chunks 1 and 2 of stage 1 were written
    chunk2 = {p.id for p in calls[2][0]}
    assert chunk2 <= set(stage1)
    calls = _pair_calls(monkeypatch)
    resumed, _, _ = _score(qwen_dir, head, head / "stopped.jsonl")
    assert resumed == whole                         # every score, bit for bit
    # chunk 1 is not run again; chunk 2's stage 1 runs again (for its KV), then its stage 2, then chunk 3
    assert [n for _, n, _ in calls] == [["direct"], ["score"]] * 2 and {p.id for p in calls[0][0]} == chunk2
    calls.clear()
    assert _score(qwen_dir, head, head / "stopped.jsonl")[0] == whole and calls == []     # finished: nothing runs
