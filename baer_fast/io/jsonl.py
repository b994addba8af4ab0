"""JSONL reading with located errors, and writes that never leave a half-written file.

Readers yield `(line_number, dict)`; every failure is an `InputError` naming the
file and 1-based line. Writers go to a temporary file in the target's folder and
are renamed into place only after everything was written and fsync'd.
"""
from __future__ import annotations

import json
import math
import os
import tempfile
from contextlib import contextmanager
from typing import Any, Iterator

from baer_fast.errors import InputError


def _reject_constant(name: str) -> float:
    # json accepts NaN/Infinity by default; they are never valid in our formats.
    raise ValueError(f"non-finite number {name} is not allowed")


def iter_jsonl(path: str) -> Iterator[tuple[int, dict]]:
    """Yield (line_no, object) for each non-blank line; raise InputError on any bad line."""
    try:
        fh = open(path, "rb")
    except FileNotFoundError:
        raise InputError("file not found", path=path) from None
    except IsADirectoryError:
        raise InputError("is a directory, expected a JSONL file", path=path) from None
    with fh:
        n_records = 0
        for line_no, raw in enumerate(fh, start=1):
            obj = _parse_line(raw, path=path, line_no=line_no)
            if obj is None:
                continue
            n_records += 1
            yield line_no, obj
    if n_records == 0:
        raise InputError("empty file: no JSON records", path=path)


def _parse_line(raw: bytes, *, path: str, line_no: int) -> dict | None:
    if line_no == 1 and raw.startswith(b"\xef\xbb\xbf"):
        raise InputError("file starts with a UTF-8 byte-order mark (BOM); save it without one",
                         path=path, line=line_no)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"not valid UTF-8 (byte {e.start})", path=path, line=line_no) from None
    if not text.strip():
        return None
    try:
        obj = json.loads(text, parse_constant=_reject_constant)
    except (json.JSONDecodeError, ValueError) as e:
        raise InputError(f"malformed JSON: {e}", path=path, line=line_no) from None
    if not isinstance(obj, dict):
        raise InputError(f"expected a JSON object, got {type(obj).__name__}", path=path, line=line_no)
    return obj


def dumps(obj: Any) -> str:
    """One canonical JSON line (sorted keys are NOT used: field order is part of the format)."""
    return json.dumps(obj, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


@contextmanager
def atomic_open(path: str, mode: str = "w"):
    """Open a temp file beside `path`; on clean exit fsync and rename over `path`, else delete it."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, mode, encoding=None if "b" in mode else "utf-8") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        _fsync_dir(folder)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _fsync_dir(folder: str) -> None:
    try:
        dfd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def write_jsonl(path: str, records) -> int:
    """Write all records atomically; return the count."""
    n = 0
    with atomic_open(path) as fh:
        for rec in records:
            fh.write(dumps(rec) + "\n")
            n += 1
    return n


def is_finite_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
