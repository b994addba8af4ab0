"""Ctrl-C (SIGINT) and SIGTERM (a cluster's time limit, `kill`) mid-run: the exit code and the one line
that says so, no lock file left behind, and the rerun resumes to the bytes of an uninterrupted run."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from baer_fast.io.records import Signals, write_signals
from tests.fixtures.kill_resume import durable, progress

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _signals(n: int) -> list:
    return [Signals(f"p{i:05d}", {"direct": [(i % 7) / 7, (i % 3) / 3], "score": [(i % 11) / 11, 0.5]})
            for i in range(n)]


def _score(sig, out):
    return [sys.executable, "-m", "baer_fast.cli", "--quiet", "score", "--signals", sig, "--out", out]


@pytest.mark.parametrize("sig,code,said,extra", [(signal.SIGINT, 130, "interrupted", ()),
                                                 (signal.SIGTERM, 143, "terminated (SIGTERM)", ()),
                                                 (signal.SIGTERM, 143, "terminated (SIGTERM)", ("--overwrite",))])
def test_a_stopped_score_says_so_and_the_rerun_resumes(tmp_path, sig, code, said, extra):
    """With --overwrite in the command, rerunning it as it is would start over: the line says so."""
    src, ref, out = (str(tmp_path / n) for n in ("s.jsonl", "ref.jsonl", "o.jsonl"))
    write_signals(src, _signals(20000))
    env = dict(os.environ, PYTHONPATH=ROOT)
    subprocess.run(_score(src, ref), env=env, check=True, capture_output=True, timeout=300)
    small = dict(env, BAER_FAST_SCORE_BATCH="1")     # many small durable batches: the signal lands mid-run
    # SIGINT at its default in the child: a runner started in the background (`cmd &`) ignores SIGINT,
    # and a Python started so never turns it into KeyboardInterrupt
    proc = subprocess.Popen(_score(src, out) + list(extra), env=small, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    while proc.poll() is None and durable(out) < 40:
        time.sleep(0.005)
    proc.send_signal(sig)
    err = proc.communicate(timeout=120)[1]
    assert not progress(out)["complete"], "the run ended before the signal"
    assert proc.returncode == code, err
    again = "it without --overwrite" if extra else "the same command"
    assert err.strip().splitlines()[-1] == f"{said}: what was written is kept, and rerunning {again} resumes from it"
    assert not os.path.exists(out + ".lock")          # closed on the way out, its lock let go
    done = subprocess.run(_score(src, out), env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    with open(out, "rb") as a, open(ref, "rb") as b:
        assert a.read() == b.read()


def test_sigterm_is_handled_only_where_main_is_the_entry_point(tmp_path, monkeypatch):
    """The console script (argv from sys.argv) turns SIGTERM into a stop for the command's run only; a
    program that calls main(argv) in its own process keeps SIGTERM (else it would go on after main
    returned 143), and a handler of its own is left alone."""
    from baer_fast import cli
    from baer_fast.commands import score
    src = str(tmp_path / "s.jsonl")
    write_signals(src, _signals(3))
    seen, run = [], score.run
    monkeypatch.setattr(score, "run", lambda args: seen.append(signal.getsignal(signal.SIGTERM)) or run(args))
    argv = ["--quiet", "score", "--signals", src, "--out"]
    monkeypatch.setattr(sys, "argv", ["baer-fast"] + argv + [str(tmp_path / "o.jsonl")])
    assert cli.main() == 0
    assert seen[-1] is cli._terminate and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    assert cli.main(argv + [str(tmp_path / "o1.jsonl")]) == 0
    assert seen[-1] is signal.SIG_DFL
    mine = signal.signal(signal.SIGTERM, lambda *_: None)
    try:
        mine = signal.getsignal(signal.SIGTERM)
        monkeypatch.setattr(sys, "argv", ["baer-fast"] + argv + [str(tmp_path / "o2.jsonl")])
        assert cli.main() == 0
        assert seen[-1] is mine and signal.getsignal(signal.SIGTERM) is mine
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def test_an_unfinished_output_given_as_an_input_is_named_in_a_warning(tmp_path, caplog):
    """fit, score and eval on the signals of an experts run that was stopped (or is still running) worked
    on part of the pairs without a word; now a warning says so, and how many records it holds."""
    import logging

    from baer_fast.cli import main
    from baer_fast.io.resumable import ResumableWriter

    part, out = str(tmp_path / "signals.jsonl"), str(tmp_path / "scores.jsonl")
    cmd = ["--quiet", "score", "--signals", part, "--out", out, "--overwrite"]

    def warned() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and part in r.getMessage()]

    w = ResumableWriter(part, fingerprint={"command": "experts"})
    w.append([s.to_json() for s in _signals(5)])
    with caplog.at_level(logging.WARNING, logger="baer_fast"):
        assert main(cmd) == 0                                          # still held by its writer
        assert warned() == [f"{part}: is being written right now by another baer-fast run (pid {os.getpid()} on "
                             f"{os.uname().nodename}) (5 records so far, per {part}.progress.json); this run reads "
                             "only those: rerun the command that writes it to complete it first"]
        w.close()
        caplog.clear()
        assert main(cmd) == 0                                          # stopped
        assert len(warned()) == 1 and "is left by a run that stopped before it finished (5 records" in warned()[0]
        with ResumableWriter(part, fingerprint={"command": "experts"}) as w:
            w.finish()
        caplog.clear()
        assert main(cmd) == 0 and warned() == []                       # finished: nothing to say


def test_an_experts_out_that_an_overwriting_run_has_not_replaced_yet_is_named(tmp_path, caplog):
    """experts --overwrite with derived experts writes <out>.raw.jsonl anew and replaces --out only when
    complete: stopped half way, --out is the earlier run's output, which fit would read as this one's."""
    import logging

    from baer_fast.cli import main
    from baer_fast.io.resumable import ResumableWriter

    out = str(tmp_path / "signals.jsonl")
    write_signals(out, _signals(6))
    with ResumableWriter(out + ".raw.jsonl", fingerprint={"command": "experts"}) as w:
        w.append([s.to_json() for s in _signals(2)])
    with caplog.at_level(logging.WARNING, logger="baer_fast"):
        assert main(["--quiet", "score", "--signals", out, "--out", str(tmp_path / "scores.jsonl")]) == 0
    notes = [r.getMessage() for r in caplog.records if r.getMessage().startswith(out)]
    assert notes == [f"{out}: is the output of an earlier run: {out}.raw.jsonl, which replaces it when complete, is "
                     "left by a run that stopped before it finished (2 records so far): rerun the command that "
                     "writes it to complete it first"]
