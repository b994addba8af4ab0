"""`baer-fast experts` killed mid-run (SIGKILL) and rerun equals one uninterrupted run."""
import json
import os
import sys

import pytest

from baer_fast.cli import main
from baer_fast.io.records import write_pairs
from tests.fixtures.kill_resume import kill_after_first_batch as _kill_after_first_batch
from tests.fixtures.kill_resume import lines as _lines
from tests.fixtures.tiny_models import make_pairs

N_PAIRS = 10


def _cmd(model, pairs, out, *extra):
    return [sys.executable, "-m", "baer_fast.cli", "-q", "experts", "--model", model, "--input", pairs,
            "--out", out, "--chunk-pairs", "2", *extra]


def _run_here(cmd) -> int:
    """Run the same command line in-process (no interpreter start-up)."""
    return main(cmd[3:])


def test_sigkill_then_resume_equals_uninterrupted(tmp_path, qwen_dir, capsys):
    pairs = str(tmp_path / "pairs.jsonl")
    write_pairs(pairs, make_pairs(N_PAIRS, seed=21, long=2))
    ref, out = str(tmp_path / "ref.jsonl"), str(tmp_path / "out.jsonl")
    assert _run_here(_cmd(qwen_dir, pairs, ref)) == 0

    done_before = _kill_after_first_batch(_cmd(qwen_dir, pairs, out), out + ".raw.jsonl")
    assert 0 < done_before < N_PAIRS, "the run was not interrupted mid-way"
    assert not os.path.exists(out)

    assert _run_here(_cmd(qwen_dir, pairs, out)) == 0
    assert f"{done_before} already done" in capsys.readouterr().err.strip().splitlines()[-1]
    got, want = _lines(out), _lines(ref)
    ids = [json.loads(x)["id"] for x in got]
    assert len(ids) == len(set(ids)) == N_PAIRS
    assert got == want
    with open(out + ".derived.json") as a, open(ref + ".derived.json") as b:
        assert json.load(a) == json.load(b)

    # a rerun of a finished run changes nothing; a different expert set is refused, not mixed in
    assert _run_here(_cmd(qwen_dir, pairs, out)) == 0
    assert _lines(out) == want
    capsys.readouterr()
    assert _run_here(_cmd(qwen_dir, pairs, out, "--experts", "direct,pride")) == 2
    assert "different run" in capsys.readouterr().err


@pytest.mark.slow
def test_streaming_without_derived_experts_resumes(tmp_path, qwen_dir):
    pairs = str(tmp_path / "pairs.jsonl")
    write_pairs(pairs, make_pairs(12, seed=4, long=3))
    ref, out = str(tmp_path / "ref.jsonl"), str(tmp_path / "out.jsonl")
    extra = ("--experts", "direct,pointwise")
    assert _run_here(_cmd(qwen_dir, pairs, ref, *extra)) == 0
    assert 0 < _kill_after_first_batch(_cmd(qwen_dir, pairs, out, *extra), out) < 12
    assert _run_here(_cmd(qwen_dir, pairs, out, *extra)) == 0
    assert _lines(out) == _lines(ref)


def test_a_run_with_derived_experts_never_replaces_a_file_it_did_not_write(tmp_path, qwen_dir):
    """With derived experts (the default bank) the resumable file is <out>.raw.jsonl and --out is written
    at the end: an unrelated --out was replaced without a word, and a progress record that a run without
    derived experts had left for --out let that run, resumed later, cut the new file mid-record."""
    pairs = str(tmp_path / "pairs.jsonl")
    write_pairs(pairs, make_pairs(4, seed=3))
    out = tmp_path / "s.jsonl"
    out.write_text('{"my": "results"}\n')
    assert main(["-q", "experts", "--model", qwen_dir, "--input", pairs, "--out", str(out)]) == 2
    assert out.read_text() == '{"my": "results"}\n'
    out.unlink()
    direct = ["-q", "experts", "--model", qwen_dir, "--input", pairs, "--out", str(out), "--experts", "direct"]
    assert main(direct) == 0
    assert main(["-q", "experts", "--model", qwen_dir, "--input", pairs, "--out", str(out)]) == 2
    assert main(["-q", "experts", "--model", qwen_dir, "--input", pairs, "--out", str(out), "--overwrite"]) == 0
    full = out.read_bytes()
    assert main(direct) == 2                     # refused: the file is not that run's any more
    assert out.read_bytes() == full
    assert main(["-q", "experts", "--model", qwen_dir, "--input", pairs, "--out", str(out)]) == 0   # its own resume
    assert out.read_bytes() == full
    assert main([*direct, "--overwrite"]) == 0   # the file is the direct run's now, though the raw file stays
    only_direct = out.read_bytes()
    assert main(["-q", "experts", "--model", qwen_dir, "--input", pairs, "--out", str(out)]) == 2
    assert out.read_bytes() == only_direct


def test_keep_texts_added_on_resume_is_refused_not_left_incomplete(tmp_path, qwen_dir, capsys):
    pairs = str(tmp_path / "pairs.jsonl")
    write_pairs(pairs, make_pairs(3, seed=4))
    run = ["-q", "experts", "--model", qwen_dir, "--input", pairs, "--out", str(tmp_path / "s.jsonl"),
           "--experts", "cot", "--max-new-tokens", "4"]
    assert main(run) == 0
    assert main([*run, "--keep-texts"]) == 2
    assert "3 pairs already in" in capsys.readouterr().err
    assert not (tmp_path / "s.jsonl.texts.jsonl").exists()
    assert main([*run, "--keep-texts", "--overwrite"]) == 0
    assert len(_lines(str(tmp_path / "s.jsonl.texts.jsonl"))) == 3


def test_an_overwrite_with_derived_experts_is_refused_while_another_run_writes_out(tmp_path, qwen_dir, capsys):
    """experts --overwrite with derived experts removed --out's progress record before taking any lock: a
    run writing --out itself (--experts without derived ones) went on with its record gone, and the
    overwriting run replaced its file at the end. --out is now locked for the whole two-phase run."""
    from baer_fast.io.resumable import ResumableWriter
    pairs, out = str(tmp_path / "pairs.jsonl"), str(tmp_path / "out.jsonl")
    write_pairs(pairs, make_pairs(2, seed=5))
    with ResumableWriter(out, fingerprint={"command": "experts"}) as w:       # the other run, mid-way
        w.append([{"id": "x"}])
        before = (open(out, "rb").read(), open(out + ".progress.json", "rb").read())
        assert _run_here(_cmd(qwen_dir, pairs, out, "--overwrite")) == 2
        assert f"{out}: another baer-fast run (pid {os.getpid()} on " in capsys.readouterr().err
        assert (open(out, "rb").read(), open(out + ".progress.json", "rb").read()) == before
    assert not os.path.exists(out + ".raw.jsonl")
