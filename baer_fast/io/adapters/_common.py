"""Small helpers shared by the adapters: located file reading and decision maps."""
from __future__ import annotations

import glob
import gzip
import json
import os

from baer_fast.errors import InputError
from baer_fast.io.jsonl import check_unicode, may_hold_surrogate


def read_json(path: str):
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8") as fh:
            text = fh.read()
        data = json.loads(text)
    except FileNotFoundError:
        raise InputError("file not found", path=path) from None
    except (ValueError, OSError) as e:
        raise InputError(f"not valid JSON: {e}", path=path) from None
    if may_hold_surrogate(text):
        for i, record in enumerate(data if isinstance(data, list) else [data], start=1):
            check_unicode(record, path=path, line=i if isinstance(data, list) else None)   # line = record number
    return data


def read_jsonl(path: str) -> list[dict]:
    opener = gzip.open if path.endswith(".gz") else open
    out = []
    try:
        with opener(path, "rt", encoding="utf-8") as fh:
            for line_no, line in enumerate(fh, start=1):
                if line.strip():
                    try:
                        out.append(json.loads(line))
                    except ValueError as e:
                        raise InputError(f"malformed JSON: {e}", path=path, line=line_no) from None
                    if may_hold_surrogate(line):
                        check_unicode(out[-1], path=path, line=line_no)
    except FileNotFoundError:
        raise InputError("file not found", path=path) from None
    return out


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
