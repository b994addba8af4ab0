"""The `--on-error skip` policy: bad input records are skipped, counted and kept aside.

One mechanism for every reader and command: a reader given a `Rejects` records each
bad line (file, line, field, error, raw text) there instead of raising; the command
then writes them to `<out>.rejects.jsonl` and says how many it skipped. Without a
`Rejects` (the default `--on-error raise`) the first bad line stops the run.

A new command gets it with three calls:

    add_on_error_argument(parser)                 # in add_arguments
    rejects = rejects_for(args, out=args.out)     # None under --on-error raise
    recs = read_pairs(path, rejects=rejects); ...; report_rejects(rejects)
"""
from __future__ import annotations

import logging
import os

from baer_fast.errors import InputError
from baer_fast.io.jsonl import write_jsonl

log = logging.getLogger("baer_fast")
ON_ERROR = ("raise", "skip")


def rejects_path(out: str) -> str:
    return out.rstrip("/" + os.sep) + ".rejects.jsonl"


class Rejects:
    """Collector of skipped input lines; `path` is where `save()` writes them."""

    def __init__(self, path: str | None = None):
        self.path = path
        self.items: list[dict] = []

    def __len__(self) -> int:
        return len(self.items)

    def add(self, err: InputError, raw: bytes | str | None = None) -> None:
        if isinstance(raw, bytes):
            raw = raw.decode("utf-8", errors="backslashreplace")
        self.items.append({"file": err.path, "line": err.line, "field": err.field,
                           "error": str(err), "raw": None if raw is None else raw.rstrip("\r\n")})

    def save(self) -> str | None:
        """Write `path` atomically (also when empty, replacing a stale one); return it."""
        if self.path is None:
            return None
        write_jsonl(self.path, self.items)
        return self.path


def add_on_error_argument(parser, where: str = "<out>.rejects.jsonl") -> None:
    """--on-error; `where` says the command's rejects file, as rejects_path names it."""
    parser.add_argument("--on-error", choices=ON_ERROR, default="raise",
                        help="bad input records: stop with an error (raise, default) or skip them, "
                             f"count them and write them to {where} (skip)")


def rejects_for(args, *, out: str) -> Rejects | None:
    """A collector when the command runs under `--on-error skip`, else None."""
    if getattr(args, "on_error", "raise") != "skip":
        return None
    return Rejects(rejects_path(out))


def report_rejects(rejects: Rejects | None) -> int:
    """Save the rejects file and log one line; return how many records were skipped."""
    if rejects is None:
        return 0
    rejects.save()
    if len(rejects):
        first = rejects.items[0]["error"]
        log.warning("skipped %d bad input record(s) -> %s (first: %s)", len(rejects), rejects.path, first)
    return len(rejects)
