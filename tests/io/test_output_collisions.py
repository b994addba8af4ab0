"""Two runs on one output (a double launch, a cluster's retry), and writes that fail part way: the
second run is refused naming the first, and whatever was written stays resumable."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from baer_fast.errors import InputError
from baer_fast.io.resumable import ResumableWriter, lock_path, progress_path

FP = {"command": "t", "input_sha256": "abc"}
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HOLD = ("import sys; from baer_fast.io.resumable import ResumableWriter as W\n"
        "w = W(sys.argv[1], fingerprint={'command': 't', 'input_sha256': 'abc'})\n"
        "w.append([{'id': 'held'}]); print('ready', flush=True); sys.stdin.read(); w.close()\n")


def _data(path) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()


def test_an_overwrite_while_another_run_writes_is_refused(tmp_path):
    """--overwrite removed the files of the run still writing them: both went on, the first one's results
    into a removed file and its progress records over the second one's."""
    out = str(tmp_path / "o.jsonl")
    with ResumableWriter(out, fingerprint=FP) as w:
        w.append([{"id": "a"}])
        with pytest.raises(InputError, match=rf"another baer-fast run \(pid {os.getpid()} on "):
            ResumableWriter(out, fingerprint=FP, overwrite=True)
        w.append([{"id": "b"}])
        w.finish()
    assert _data(out) == b'{"id":"a"}\n{"id":"b"}\n'
    with ResumableWriter(out, fingerprint=FP) as w:      # its own progress record: resumes, all done
        assert w.done_ids == {"a", "b"} and w.complete
    assert not os.path.exists(lock_path(out))           # let go and removed on close


def test_a_lock_file_left_by_a_killed_run_does_not_block(tmp_path):
    out = str(tmp_path / "o.jsonl")
    with ResumableWriter(out, fingerprint=FP) as w:
        w.append([{"id": "a"}])
    with open(lock_path(out), "w") as fh:                # what a SIGKILL leaves: the file, no lock
        fh.write("999999999 elsewhere\n")
    with ResumableWriter(out, fingerprint=FP) as w:
        assert w.done_ids == {"a"}
    assert not os.path.exists(lock_path(out))


def test_score_overwrite_refuses_an_output_another_process_writes(tmp_path, capsys):
    """Across processes, through the CLI: exit 2, one line naming the other run; its output untouched."""
    from baer_fast.cli import main
    from baer_fast.io.records import Signals, write_signals

    sig, out = str(tmp_path / "s.jsonl"), str(tmp_path / "scores.jsonl")
    write_signals(sig, [Signals(f"p{i}", {"direct": [0.7, 0.6], "score": [0.4, 0.5]}) for i in range(3)])
    env = dict(os.environ, PYTHONPATH=ROOT)
    holder = subprocess.Popen([sys.executable, "-c", HOLD, out], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              env=env, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        before = (_data(out), _data(progress_path(out)))
        assert main(["--quiet", "score", "--signals", sig, "--out", out, "--overwrite"]) == 2
        err = capsys.readouterr().err
        assert f"another baer-fast run (pid {holder.pid} on " in err and "Traceback" not in err
        assert (_data(out), _data(progress_path(out))) == before
    finally:
        holder.communicate("", timeout=60)
    assert holder.returncode == 0 and not os.path.exists(lock_path(out))
    assert main(["--quiet", "score", "--signals", sig, "--out", out, "--overwrite"]) == 0
    assert [json.loads(x)["id"] for x in _data(out).decode().splitlines()] == ["p0", "p1", "p2"]
