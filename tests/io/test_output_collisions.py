"""Two runs on one output (a double launch, a cluster's retry), and writes that fail part way: the
second run is refused naming the first, and whatever was written stays resumable."""
from __future__ import annotations

import contextlib
import errno
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


class _FullDisk:
    """The data file of a writer on a disk that fills up: half the bytes land, then ENOSPC."""

    def __init__(self, real):
        self.real = real

    def write(self, data):
        self.real.write(data[:len(data) // 2])
        self.real.flush()
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def __getattr__(self, name):
        return getattr(self.real, name)


def _fill_disk_at(monkeypatch, call: int, where: str) -> None:
    """From the `call`-th append of any writer on, the disk is full: for its data ('data') or for the
    progress record written after them ('progress', through the real atomic_open)."""
    from baer_fast.io import resumable
    append, calls, real_open = ResumableWriter.append, [], resumable.atomic_open

    @contextlib.contextmanager
    def full_open(path, *a, **k):
        with real_open(path, *a, **k) as fh:
            yield _FullDisk(fh)

    def failing(self, records):
        calls.append(1)
        if len(calls) == call:
            if where == "data":
                self._fh = _FullDisk(self._fh)
            else:
                monkeypatch.setattr(resumable, "atomic_open", full_open)
        return append(self, records)
    monkeypatch.setattr(resumable.ResumableWriter, "append", failing)


@pytest.mark.parametrize("where,extra", [("data", []), ("progress", []), ("data", ["--overwrite"])])
def test_a_full_disk_is_one_clear_error_and_the_rerun_resumes_to_the_same_bytes(tmp_path, monkeypatch, capsys,
                                                                                 where, extra):
    """A full disk mid-run was a traceback (OSError); now: exit 2, the output named, what is kept, how to go on."""
    from baer_fast.cli import main
    from baer_fast.io.records import Signals, write_signals

    sig, ref, out = (str(tmp_path / n) for n in ("s.jsonl", "ref.jsonl", "o.jsonl"))
    write_signals(sig, [Signals(f"p{i}", {"direct": [(i % 7) / 7, 0.3], "score": [0.6, (i % 5) / 5]}) for i in range(40)])
    monkeypatch.setenv("BAER_FAST_SCORE_BATCH", "4")
    assert main(["--quiet", "score", "--signals", sig, "--out", ref]) == 0
    capsys.readouterr()
    with monkeypatch.context() as m:
        _fill_disk_at(m, 3, where)
        assert main(["--quiet", "score", "--signals", sig, "--out", out, *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    again = "it without --overwrite" if extra else "the same command"
    assert err == [f"error: {out}: cannot write: {os.strerror(errno.ENOSPC)}; the 8 records written before are "
                   f"kept, and rerunning {again} resumes from them once there is room"]
    with open(progress_path(out), encoding="utf-8") as fh:
        assert json.load(fh)["records"] == 8
    assert not os.path.exists(lock_path(out)) and not [f for f in os.listdir(tmp_path) if f.endswith(".tmp")]
    assert main(["--quiet", "score", "--signals", sig, "--out", out]) == 0
    assert _data(out) == _data(ref)


def test_a_full_disk_in_an_atomic_write_names_the_file_and_replaces_nothing(tmp_path):
    from baer_fast.errors import OutputError
    from baer_fast.io.jsonl import atomic_open

    path = tmp_path / "head.json"
    path.write_text("old\n")
    with pytest.raises(OutputError, match=rf"{path}: cannot write: .*; nothing was replaced"):
        with atomic_open(str(path)) as fh:
            fh.write("new")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    assert path.read_text() == "old\n" and os.listdir(tmp_path) == ["head.json"]


def test_a_filesystem_without_flock_runs_with_a_warning(tmp_path, monkeypatch, caplog):
    """Lustre mounted without -o flock answers ENOSYS: every run was refused as 'another baer-fast run is
    writing this output', though none was; now it runs unlocked and says so."""
    import fcntl
    import logging

    from baer_fast.io import resumable

    def no_flock(fd, op):
        raise OSError(errno.ENOSYS, os.strerror(errno.ENOSYS))
    monkeypatch.setattr(resumable.fcntl, "flock", no_flock)
    assert resumable.fcntl is fcntl
    out = str(tmp_path / "o.jsonl")
    with caplog.at_level(logging.WARNING, logger="baer_fast"):
        with ResumableWriter(out, fingerprint=FP) as w:
            w.append([{"id": "a"}])
            w.finish()
        assert resumable.unfinished_note(out) is None
    assert [r.getMessage() for r in caplog.records] == [
        f"{out}: this filesystem cannot lock {out}.lock ({os.strerror(errno.ENOSYS)}): a second run on this output "
        "at the same time would not be refused"]
    assert _data(out) == b'{"id":"a"}\n' and sorted(os.listdir(tmp_path)) == ["o.jsonl", "o.jsonl.progress.json"]
