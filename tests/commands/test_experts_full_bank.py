"""`baer-fast experts` with the full bank (single-pass + generative): end to end, and killed
mid-run (SIGKILL) then rerun equals one uninterrupted run, texts side file included."""
import json
import sys

import pytest

from baer_fast import protocols
from baer_fast.cli import main
from baer_fast.io.records import write_pairs
from tests.fixtures.kill_resume import kill_after_first_batch as _kill_after_first_batch
from tests.fixtures.kill_resume import lines as _lines
from tests.fixtures.prompts import pairs as make_pairs

N_PAIRS = 8


def _cmd(model, pairs, out, *extra):
    return [sys.executable, "-m", "baer_fast.cli", "-q", "experts", "--model", model, "--input", pairs,
            "--out", out, "--chunk-pairs", "2", "--experts", "all", "--max-new-tokens", "4,reference=6",
            "--keep-texts", *extra]


def test_full_bank_end_to_end(tmp_path, qwen_path, capsys):
    pairs = str(tmp_path / "pairs.jsonl")
    write_pairs(pairs, make_pairs(3, seed=9))
    out = str(tmp_path / "out.jsonl")
    assert main(_cmd(qwen_path, pairs, out)[3:]) == 0
    err = capsys.readouterr().err
    assert "generative experts (cost per expert" in err and "reference" in err
    assert "MiB (engine)" in err and "MiB (decoder slots)" in err.strip().splitlines()[-1]
    recs = [json.loads(x) for x in _lines(out)]
    assert [r["id"] for r in recs] == ["g000", "g001", "g002"]     # computed in content order, written in input order
    for rec in recs:
        assert set(rec["experts"]) == set(protocols.ALL)
        assert rec["meta"]["generation"]["prepair"]["calls"] == 2
        assert rec["meta"]["generation"]["reference"]["max_new_tokens"] == 6
    texts = [json.loads(x) for x in _lines(out + ".texts.jsonl")]
    assert [t["id"] for t in texts] == [r["id"] for r in recs]             # in the same order
    assert all(set(t["texts"]) == set(protocols.GENERATIVE) for t in texts)
    assert len(texts[0]["texts"]["self_consistency"]["ab"]) == 5

    # a finished run reruns to the same output; other generation settings are refused, not mixed in
    assert main(_cmd(qwen_path, pairs, out)[3:]) == 0
    assert "3 already done" in capsys.readouterr().err.strip().splitlines()[-1]
    assert [json.loads(x) for x in _lines(out)] == recs
    assert main(_cmd(qwen_path, pairs, out, "--seed", "1")[3:]) == 2
    assert "different run" in capsys.readouterr().err


@pytest.mark.slow
def test_resume_after_sigkill_equals_uninterrupted(tmp_path, qwen_path, capsys):
    """~70 s on the shared 2-core machine (two interpreter/model start-ups): run with -m slow."""
    pairs = str(tmp_path / "pairs.jsonl")
    write_pairs(pairs, make_pairs(N_PAIRS, seed=9))
    ref, out = str(tmp_path / "ref.jsonl"), str(tmp_path / "out.jsonl")
    assert main(_cmd(qwen_path, pairs, ref)[3:]) == 0
    want = _lines(ref)
    capsys.readouterr()

    done_before = _kill_after_first_batch(_cmd(qwen_path, pairs, out), out + ".raw.jsonl")
    assert 0 < done_before < N_PAIRS, "the run was not interrupted mid-way"
    assert main(_cmd(qwen_path, pairs, out)[3:]) == 0
    assert f"{done_before} already done" in capsys.readouterr().err.strip().splitlines()[-1]
    assert _lines(out) == want
    texts = [json.loads(x)["id"] for x in _lines(out + ".texts.jsonl")]
    assert sorted(texts) == sorted(set(texts)) == sorted(json.loads(x)["id"] for x in want)
    assert sorted(_lines(out + ".texts.jsonl")) == sorted(_lines(ref + ".texts.jsonl"))


def test_bad_budget_is_a_clear_error(tmp_path, qwen_path, capsys):
    pairs = str(tmp_path / "pairs.jsonl")
    write_pairs(pairs, make_pairs(1))
    args = ["experts", "--model", qwen_path, "--input", pairs, "--out", str(tmp_path / "o.jsonl"),
            "--experts", "cot", "--max-new-tokens", "cot=0"]
    assert main(args) == 2
    assert "--max-new-tokens" in capsys.readouterr().err
    assert main(args[:-1] + ["direct=5"]) == 2
