"""Append-only JSONL outputs that survive a crash and resume without duplicates.

Data go to `path` (plain JSONL, no header); a sidecar `path + ".progress.json"` holds the run's
fingerprint and the byte length of the last complete batch, rewritten atomically after each
fsync'd batch. On restart the data file is cut back to that length, ids already written are
skipped, a different fingerprint (other model, head or input) is refused instead of mixed in, and
so is a second run on one output, --overwrite too (a lock on `path + ".lock"`, where fcntl exists).

    fp = {"command": "experts", "input_sha256": file_sha256(inp), "model": ...}
    with ResumableWriter(out, fingerprint=fp, overwrite=args.overwrite) as w:
        todo = [p for p in pairs if p.id not in w.done_ids]
        for batch in batches(todo):
            w.append([result_record(...) for ...])      # each record has a unique "id"
        w.finish()
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import socket

from baer_fast.errors import InputError, OutputError
from baer_fast.io.jsonl import atomic_open, check_output, dumps, fsync_dir

try:
    import fcntl
except ImportError:          # not POSIX: no lock, everything else holds
    fcntl = None

log = logging.getLogger("baer_fast")
_FIX = "pass --overwrite to start again, or choose another --out"


def progress_path(path: str) -> str:
    return path + ".progress.json"


def lock_path(path: str) -> str:
    return path + ".lock"


def _holder(fd: int) -> str:
    """' (pid N on HOST)' as the lock's holder wrote it, or '' (not written yet)."""
    try:
        pid, host = os.pread(fd, 200, 0).decode("utf-8").split()
        return f" (pid {int(pid)} on {host})"
    except (OSError, ValueError, UnicodeDecodeError):
        return ""


def _acquire(path: str) -> int | None:
    """An exclusive lock on `path`'s lock file -> its fd. A holder removes the file before it lets go,
    so a lock taken on a file no longer at that path is let go and taken again on the one there."""
    if fcntl is None:
        return None
    lock = lock_path(path)
    while True:
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as e:
            raise InputError(f"cannot write here: {e.strerror or e}", path=lock) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise InputError(f"another baer-fast run{holder} is writing this output right now: wait for it to "
                             f"end (or stop it), then run again", path=path) from None
        except OSError as e:        # no flock on this filesystem (Lustre without -o flock, some FUSE mounts)
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(lock)
            log.warning("%s: this filesystem cannot lock %s (%s): a second run on this output at the same time "
                        "would not be refused", path, lock, e.strerror or e)
            return None
        try:
            st, here = os.fstat(fd), os.stat(lock)
            if (st.st_dev, st.st_ino) == (here.st_dev, here.st_ino):
                os.ftruncate(fd, 0)
                os.write(fd, f"{os.getpid()} {socket.gethostname()}\n".encode("utf-8"))
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)


def _release(path: str, fd: int | None) -> None:
    if fd is None:
        return
    try:
        os.unlink(lock_path(path))       # before letting go: see _acquire
    except FileNotFoundError:
        pass
    os.close(fd)


@contextlib.contextmanager
def holding(path: str):
    """`path`'s lock, held for a block that writes it other than through a ResumableWriter (experts' --out,
    written whole at the end of a run whose resumable file is <out>.raw.jsonl)."""
    check_output(path)
    fd = _acquire(path)
    try:
        yield
    finally:
        _release(path, fd)


def _being_written(path: str) -> str | None:
    """' (pid N on HOST)' or '' when a run holds `path`'s lock now; None when none does."""
    if fcntl is None:
        return None
    try:
        fd = os.open(lock_path(path), os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return None                      # a file a killed run left: no one holds it
    except BlockingIOError:
        return _holder(fd)
    except OSError:                      # no flock here: nothing to tell
        return None
    finally:
        os.close(fd)


def _records_so_far(path: str) -> int | None:
    """The records of `path` per its progress record when that says the run has not finished; else None."""
    try:
        with open(progress_path(path), encoding="utf-8") as fh:
            prog = json.load(fh)
        return None if prog["complete"] is not False else int(prog["records"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def unfinished_note(path: str) -> str | None:
    """For a file given as an input: why it is no finished output -> one line, else None. Its progress
    record says the run writing it has not finished (stopped, or still running); or it is an experts
    --out whose <out>.raw.jsonl a run (--overwrite) is writing anew: it holds the earlier run's pairs."""
    raw = path + ".raw.jsonl"
    for src in (path, raw):
        n = _records_so_far(src)
        if n is None or src == raw and not os.path.exists(path):
            continue
        who = _being_written(src)
        state = (f"being written right now by another baer-fast run{who}" if who is not None else
                 "left by a run that stopped before it finished")
        if src == path:
            return (f"{path}: is {state} ({n} records so far, per {progress_path(path)}); this run reads only "
                    "those: rerun the command that writes it to complete it first")
        return (f"{path}: is the output of an earlier run: {raw}, which replaces it when complete, is {state} "
                f"({n} records so far): rerun the command that writes it to complete it first")
    return None


def warn_unfinished_inputs(args, inputs=("signals", "scores", "input")) -> None:
    """A warning per input flag naming a resumable output that is not finished (fit, score or eval on an
    interrupted run's signals would otherwise work on part of the pairs without a word)."""
    for name in inputs:
        vals = getattr(args, name, None)
        for v in vals if isinstance(vals, list) else [vals]:
            if isinstance(v, str) and (note := unfinished_note(v)) is not None:
                log.warning("%s", note)


def file_sha256(path: str) -> str:
    """Hash of an input file (the fingerprint's 'same input' test)."""
    h = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    except FileNotFoundError:
        raise InputError("file not found", path=path) from None
    except IsADirectoryError:
        raise InputError("is a directory, expected a file", path=path) from None
    return h.hexdigest()


def _differing(old: dict, new: dict) -> list[str]:
    """The keys whose values differ between two records of a run (absent counts as None)."""
    return sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))


class ResumableWriter:
    """with ResumableWriter(out, fingerprint=fp) as w: skip w.done_ids; w.append(batch); w.finish()"""

    def __init__(self, path: str, *, fingerprint: dict, overwrite: bool = False, settings: dict | None = None):
        """fingerprint: what must match to resume; settings: what may differ on a resume at the cost of
        the last bits of the remaining results (batch shapes, kernels), warned about when it does."""
        self.path, self.fingerprint = path, json.loads(json.dumps(fingerprint))
        self.settings = json.loads(json.dumps(settings)) if settings is not None else None
        self.done_ids: set[str] = set()
        self.resumed, self._overwrite = False, overwrite
        check_output(path)
        self._lock_fd = _acquire(path)      # before an --overwrite removes, or a resume cuts, anything
        try:
            self._open(overwrite)
        except BaseException:
            _release(path, self._lock_fd)
            raise

    def _open(self, overwrite: bool) -> None:
        path = self.path
        if overwrite:
            for p in (path, progress_path(path)):
                if os.path.exists(p):
                    os.unlink(p)
        existed = os.path.exists(path)
        self._created = not existed
        if not existed:
            self._start()
        self._fh = open(path, "ab")
        if existed:
            try:
                self._resume()
            except BaseException:
                self._fh.close()
                raise

    def _start(self) -> None:
        # The progress record is written first: a data file without one is never ours.
        self._bytes, self._records, self.complete = 0, 0, False
        try:
            self._write_progress()
        except OSError as e:
            raise InputError(f"cannot write here: {e.strerror or e}", path=self.path) from None
        open(self.path, "wb").close()
        fsync_dir(os.path.dirname(os.path.abspath(self.path)))

    def _read_progress(self) -> dict:
        prog_file = progress_path(self.path)
        if not os.path.exists(prog_file):
            raise InputError("output exists but has no progress record, so it is no resumable baer-fast output "
                             "in progress (an experts run with derived experts, such as the default bank, keeps "
                             f"its record beside <out>.raw.jsonl); {_FIX}", path=self.path)
        try:
            with open(prog_file, encoding="utf-8") as fh:
                prog = json.load(fh)
            int(prog["bytes"]), int(prog["records"]), dict(prog["fingerprint"])
        except (ValueError, KeyError, TypeError, UnicodeDecodeError):
            raise InputError(f"progress record is unreadable; {_FIX}", path=prog_file) from None
        return prog

    def _resume(self) -> None:
        prog = self._read_progress()
        if prog["fingerprint"] != self.fingerprint:
            diff = _differing(prog["fingerprint"], self.fingerprint)
            raise InputError(f"output was written by a different run (differs in: {', '.join(diff)}); "
                             f"refusing to mix results — {_FIX}", path=self.path)
        was = prog.get("settings")
        # a setting the starting run did not record (a file from an older version) is not known to differ
        diff = [k for k in _differing(was, self.settings) if k in was] if self.settings and was else []
        if diff:
            log.warning("%s: resuming with other engine settings than the run that started it (%s): the pairs "
                        "left may differ from an uninterrupted run's in the last bits", self.path,
                        ", ".join(f"{k} {was.get(k)} -> {self.settings.get(k)}" for k in diff))
        self._bytes, self._records = int(prog["bytes"]), int(prog["records"])
        self.complete = bool(prog.get("complete"))
        size = os.path.getsize(self.path)
        if size < self._bytes:
            raise InputError(f"output is shorter ({size} bytes) than its progress record says "
                             f"({self._bytes}); it was cut by something else; {_FIX}", path=self.path)
        with open(self.path, "rb") as fh:       # whole lines, as many as recorded: else not the file it records
            head = fh.read(self._bytes)
        if head.count(b"\n") != self._records or (head and not head.endswith(b"\n")):
            raise InputError(f"output does not match its progress record ({self._records} records in "
                             f"{self._bytes} bytes): it was replaced or edited since, so resuming would cut "
                             f"it; {_FIX}", path=self.path)
        if size > self._bytes:
            with open(self.path, "r+b") as fh:
                fh.truncate(self._bytes)      # drop a torn batch written after the last progress
                fh.flush()
                os.fsync(fh.fileno())
        self._load_done_ids()
        self.resumed = True

    def _load_done_ids(self) -> None:
        with open(self.path, "rb") as fh:
            for line_no, raw in enumerate(fh, start=1):
                try:
                    rid = json.loads(raw)["id"]
                except (ValueError, KeyError, TypeError):
                    raise InputError(f"unreadable record in a resumable output; {_FIX}",
                                     path=self.path, line=line_no) from None
                if rid in self.done_ids:
                    raise InputError(f"duplicate id {rid!r} in a resumable output; {_FIX}",
                                     path=self.path, line=line_no, field="id")
                self.done_ids.add(rid)
        if len(self.done_ids) != self._records:
            raise InputError(f"output holds {len(self.done_ids)} records but its progress record says "
                             f"{self._records}; {_FIX}", path=self.path)

    def _write_progress(self, *, sync_dir: bool = True) -> None:
        # Per batch the folder is not fsync'd: after a power loss an older progress record
        # (fewer bytes) may reappear, which only makes the resume redo a batch.
        prog = {"fingerprint": self.fingerprint, "bytes": self._bytes, "records": self._records,
                "complete": self.complete, **({"settings": self.settings} if self.settings is not None else {})}
        with atomic_open(progress_path(self.path), sync_dir=sync_dir) as fh:
            fh.write(json.dumps(prog, sort_keys=True) + "\n")

    def append(self, records: list[dict]) -> None:
        """Write one batch, flush, fsync, then record progress (the batch is now durable)."""
        if not records:
            return
        ids = [r["id"] for r in records]
        if len(set(ids)) != len(ids) or not self.done_ids.isdisjoint(ids):
            raise ValueError("ResumableWriter.append: an id was already written (caller must skip done_ids)")
        data = "".join(dumps(r) + "\n" for r in records).encode("utf-8")
        with self._writing():
            self._fh.write(data)
            self._fh.flush()
            os.fsync(self._fh.fileno())
            self._bytes += len(data)
            self._records += len(records)
            self.done_ids.update(ids)
            self._write_progress(sync_dir=False)

    @contextlib.contextmanager
    def _writing(self):
        """A write that fails (disk full, quota, I/O error) -> one located error saying what is kept: the
        records of the last progress record; a rerun cuts anything after them and resumes."""
        kept = self._records
        try:
            yield
        except (OSError, OutputError) as e:
            os_err = e.__cause__ if isinstance(e, OutputError) else e      # atomic_open's keeps the OSError
            why = getattr(os_err, "strerror", None) or str(os_err)
            again = "it without --overwrite" if self._overwrite else "the same command"
            raise OutputError(f"cannot write: {why}; the {kept} records written before are kept, and rerunning "
                              f"{again} resumes from them once there is room", path=self.path) from None

    def reorder(self, ids: list[str]) -> None:
        """Rewrite the data file with its records in the order of `ids` (records with other ids
        after them, as they were), atomically: the same lines, so the same byte and record counts,
        and a crash leaves the old order or the new one, both resumable."""
        with open(self.path, "rb") as fh:
            lines = fh.readlines()
        rank = {rid: k for k, rid in enumerate(dict.fromkeys(ids))}
        keyed = [(rank.get(json.loads(raw)["id"], len(rank)), k, raw) for k, raw in enumerate(lines)]
        if [k for _, k, _ in sorted(keyed)] == list(range(len(lines))):
            return                                            # already in that order
        with self._writing(), atomic_open(self.path, "wb") as fh:
            fh.writelines(raw for _, _, raw in sorted(keyed))
        self._fh.close()                                      # the old inode: append to the new one
        self._fh = open(self.path, "ab")

    def finish(self) -> None:
        """Mark the output complete (every input record has its result)."""
        self.complete = True
        with self._writing():
            self._write_progress()

    def close(self) -> None:
        with contextlib.suppress(OSError):      # a flush of a failed append's rest: cut on resume anyway
            self._fh.close()
        _release(self.path, self._lock_fd)
        self._lock_fd = None

    def discard_if_unused(self) -> None:
        """Close; and if this writer created the output and nothing was appended, remove it and its
        progress record: a run that fails before its first result (a model that does not load, a
        flag the engine refuses) leaves nothing that would block the corrected command."""
        if not self._fh.closed:
            self._fh.close()
        if self._created and self._records == 0:
            for p in (self.path, progress_path(self.path)):
                if os.path.exists(p):
                    os.unlink(p)
        self.close()                 # the lock last: no other run starts on files about to go

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        self.close()
        return False
