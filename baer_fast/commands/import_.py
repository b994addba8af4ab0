"""`baer-fast import KIND SRC --out DIR`: published judge outputs -> pairs.jsonl + signals.<cond>.jsonl.

Crash safety is per file: each output is written to a temp file, fsync'd and renamed into
place (`io/jsonl.atomic_open`), so a killed import leaves every file either complete (new or
the previous import's) or absent, never half-written. Rerunning the import rewrites the
same bytes, so it is also the way to resume one.
"""
from __future__ import annotations

import logging
import os

from baer_fast.io.adapters import ADAPTERS


def add_arguments(p) -> None:
    p.add_argument("kind", choices=ADAPTERS, help="native format of SRC")
    p.add_argument("src", help="folder in the source's native layout")
    p.add_argument("--out", required=True, help="output folder (pairs.jsonl, signals.<condition>.jsonl)")


def signals_filename(condition: str) -> str:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in condition)
    return f"signals.{safe}.jsonl"


def run(args) -> int:
    from baer_fast.io.adapters import load
    from baer_fast.io.records import write_pairs, write_signals

    imported = load(args.kind, args.src)
    os.makedirs(args.out, exist_ok=True)
    n = write_pairs(os.path.join(args.out, "pairs.jsonl"), imported.pairs)
    for note in imported.notes:
        logging.getLogger("baer_fast").info(note)
    print(f"pairs.jsonl: {n} pairs")
    for condition, signals in sorted(imported.banks.items()):
        name = signals_filename(condition)
        write_signals(os.path.join(args.out, name), signals)
        n_exp = len({k for s in signals for k in s.experts})
        print(f"{name}: condition {condition}, {len(signals)} pairs, {n_exp} experts")
    return 0
