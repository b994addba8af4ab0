"""Small helpers shared by the adapters: located file reading and decision maps."""
from __future__ import annotations

import glob
import gzip
import json
import os

from baer_fast.errors import InputError
from baer_fast.io.jsonl import READ_ERRORS, check_unicode, iter_jsonl_lines, lfs_pointer, may_hold_surrogate, unreadable


def read_json(path: str):
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8") as fh:
            text = fh.read()
    except FileNotFoundError:
        raise InputError("file not found", path=path) from None
    except UnicodeDecodeError as e:
        raise InputError(f"not valid UTF-8 (byte {e.start})", path=path) from None
    except READ_ERRORS as e:
        raise unreadable(path, e) from None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise lfs_pointer(path) or InputError(f"not valid JSON: {e}", path=path) from None
    if may_hold_surrogate(text):
        for i, record in enumerate(data if isinstance(data, list) else [data], start=1):
            check_unicode(record, path=path, line=i if isinstance(data, list) else None)   # line = record number
    return data


def read_jsonl(path: str, rejects=None) -> list[tuple[int, dict | None]]:
    """(line, object) per non-blank line of a JSONL file (`.gz` too), by the project's JSONL reader;
    under skip a bad line is kept in `rejects` and given as None, so files matched by position stay
    aligned. An empty file is []."""
    return [(line, obj) for line, obj, _ in iter_jsonl_lines(path, rejects)]


def need_dir(path: str, what: str) -> None:
    if not os.path.isdir(path):
        raise InputError(f"expected a folder holding {what}", path=path)


def field(obj: dict, name: str, *, path: str, line: int | None = None):
    if name not in obj:
        raise InputError("missing field", path=path, line=line, field=name)
    return obj[name]


def one_file(src: str, pattern: str) -> str:
    """The single file matching `pattern` in `src`, or else anywhere below it (upstream Auto-J keeps
    its test data in `data/test/` and the verdicts in `data/outputs/`); a located error naming what
    was found if there are none or several."""
    found = sorted(glob.glob(os.path.join(src, pattern)))
    if not found:
        found = sorted(glob.glob(os.path.join(src, "**", pattern), recursive=True))
    if len(found) != 1:
        names = "".join(f"\n  {os.path.relpath(f, src)}" for f in found[:10]) + ("\n  ..." if len(found) > 10 else "")
        raise InputError(f"expected one file matching {pattern} in this folder or below it, "
                         f"found {len(found)}{':' if found else ''}{names}", path=src)
    return found[0]
