"""Append-only JSONL outputs that survive a crash and resume without duplicates.

Data go to `path` (plain JSONL, the interchange format, no header line); a sidecar
`path + ".progress.json"` holds the run's fingerprint and the byte length of the last
complete batch, and is rewritten atomically after each batch is flushed and fsync'd.
On restart the data file is cut back to that length (dropping a torn last batch), the
ids already written are skipped, and a different fingerprint (other model, head or
input) is refused instead of mixed in.
"""
from __future__ import annotations

import hashlib
import json
import os

from baer_fast.errors import InputError
from baer_fast.io.jsonl import atomic_open, dumps


def progress_path(path: str) -> str:
    return path + ".progress.json"


def file_sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class ResumableWriter:
    """with ResumableWriter(out, fingerprint=fp) as w: skip w.done_ids; w.append(batch)"""

    def __init__(self, path: str, *, fingerprint: dict, overwrite: bool = False):
        self.path, self.fingerprint = path, json.loads(json.dumps(fingerprint))
        self.done_ids: set[str] = set()
        self.resumed = False
        if overwrite:
            for p in (path, progress_path(path)):
                if os.path.exists(p):
                    os.unlink(p)
        if os.path.exists(path):
            self._resume()
        else:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            open(path, "wb").close()
            self._bytes, self._records, self.complete = 0, 0, False
            self._write_progress()
        self._fh = open(path, "ab")

    def _resume(self) -> None:
        prog_file = progress_path(self.path)
        if not os.path.exists(prog_file):
            raise InputError("output exists but has no progress record, so it was not written by "
                             "a resumable baer-fast run; pass --overwrite or choose another --out",
                             path=self.path)
        with open(prog_file, encoding="utf-8") as fh:
            prog = json.load(fh)
        if prog.get("fingerprint") != self.fingerprint:
            diff = sorted(k for k in set(prog.get("fingerprint", {})) | set(self.fingerprint)
                          if prog.get("fingerprint", {}).get(k) != self.fingerprint.get(k))
            raise InputError(f"output was written by a different run (differs in: {', '.join(diff)}); "
                             "refusing to mix results — pass --overwrite or choose another --out",
                             path=self.path)
        self._bytes, self._records = int(prog["bytes"]), int(prog["records"])
        self.complete = bool(prog.get("complete"))
        with open(self.path, "r+b") as fh:
            fh.truncate(self._bytes)          # drop a torn batch written after the last progress
        with open(self.path, "rb") as fh:
            for raw in fh:
                self.done_ids.add(json.loads(raw)["id"])
        self.resumed = True

    def _write_progress(self) -> None:
        prog = {"fingerprint": self.fingerprint, "bytes": self._bytes, "records": self._records,
                "complete": self.complete}
        with atomic_open(progress_path(self.path)) as fh:
            fh.write(json.dumps(prog, sort_keys=True) + "\n")

    def append(self, records: list[dict]) -> None:
        """Write one batch, flush, fsync, then record progress (the batch is now durable)."""
        if not records:
            return
        data = "".join(dumps(r) + "\n" for r in records).encode("utf-8")
        self._fh.write(data)
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self._bytes += len(data)
        self._records += len(records)
        self.done_ids.update(r["id"] for r in records)
        self._write_progress()

    def finish(self) -> None:
        self.complete = True
        self._write_progress()

    def close(self) -> None:
        self._fh.close()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        self.close()
        return False
