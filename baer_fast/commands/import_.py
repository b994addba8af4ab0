"""`baer-fast import FORMAT SRC --out DIR`: a source's native layout -> DIR/pairs.jsonl (+ signals.<cond>.jsonl).

Judge-output sources (llmbar, judgebench, autoj, pandalm) also write one signals bank per
condition; preference datasets (rewardbench, hh-rlhf, ultrafeedback, mtbench-human, arena,
evalbiasbench, table) write pairs only (docs/datasets.md). Crash safety is per file: each output is written to a
temp file, fsync'd and renamed into place (`io/jsonl.atomic_open`), so a killed import leaves
every file either complete (new or the previous import's) or absent, never half-written; with
`--on-error skip` bad rows go to DIR/pairs.jsonl.rejects.jsonl. Rerunning rewrites the same bytes.
"""
from __future__ import annotations

import logging
import os

from baer_fast.io.adapters import ADAPTERS

_COLS = ("question", "chosen", "rejected", "a", "b", "label", "subset", "category", "id")   # table's --<col>-col


def add_arguments(p) -> None:
    from baer_fast.io.rejects import add_on_error_argument

    p.add_argument("kind", choices=ADAPTERS, metavar="FORMAT", help=f"native format of SRC: {', '.join(ADAPTERS)}")
    p.add_argument("src", help="folder in the source's native layout, or a data file")
    p.add_argument("--out", required=True, help="output folder (pairs.jsonl, signals.<condition>.jsonl)")
    add_on_error_argument(p, "DIR/pairs.jsonl.rejects.jsonl")
    g = p.add_argument_group("table / ultrafeedback options")
    for col in _COLS:
        g.add_argument(f"--{col}-col", help=f"table: column holding the {col}")
    g.add_argument("--label-values", metavar="A,B[,TIE]",
                   help="table: the --label-col values meaning a is better, b is better (and tie), e.g. 0,1 or "
                        "1,2,0; needed for numbers and any other value than a, b, tie, model_a, model_b (any case)")
    g.add_argument("--rating", choices=("overall_score", "fine-grained_score"),
                   help="ultrafeedback: the rating that orders completions (default overall_score)")


_TABLE_ONLY = tuple(f"{col}_col" for col in _COLS) + ("label_values",)


def _check_options(args) -> None:
    """An option of another format would be ignored: refused, so the pairs are what was asked for."""
    from baer_fast.errors import InputError

    only = {name: "table" for name in _TABLE_ONLY}
    only["rating"] = "ultrafeedback"
    for name, kind in only.items():
        if getattr(args, name, None) is not None and args.kind != kind:
            raise InputError(f"only import {kind} reads it; import {args.kind} would ignore it",
                             field="--" + name.replace("_", "-"))


def signals_filename(condition: str) -> str:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in condition)
    return f"signals.{safe}.jsonl"


def _missing_folders(path: str) -> list[str]:
    """The folders that creating `path` makes (it and any missing parents), deepest first."""
    missing, path = [], os.path.abspath(path)
    while not os.path.exists(path) and os.path.dirname(path) != path:
        missing.append(path)
        path = os.path.dirname(path)
    return missing


def _remove_empty(folders: list[str]) -> None:
    for folder in folders:                          # deepest first; one holding anything stays
        if not os.path.isdir(folder) or os.listdir(folder):
            return
        os.rmdir(folder)


def _failed(err: BaseException, rejects, src: str):
    """The error to raise for a failed import: under --on-error skip with records set aside, they
    are written first and the error names their file and the first of them."""
    from baer_fast.errors import InputError

    if not isinstance(err, InputError) or rejects is None or not len(rejects):
        return err
    rejects.save()
    return InputError(f"{err.message}; the {len(rejects)} rejected record(s) are in {rejects.path} "
                      f"(first: {rejects.items[0]['error']})", path=err.path or src, line=err.line, field=err.field)


def _stale_rejects(path: str, rejects) -> str:
    """Under --on-error raise, an earlier skip import's rejects file is removed (it does not belong to
    these pairs); under skip it is replaced. What was done, for the output ('' when nothing)."""
    if not os.path.exists(path):
        return ""
    if rejects is not None:
        return " (replacing an earlier import's)"
    os.remove(path)
    logging.getLogger("baer_fast").warning(
        "removed %s: an earlier --on-error skip import's rejects, not this import's", path)
    return ""


def run(args) -> int:
    from collections import Counter

    from baer_fast.io.adapters import load
    from baer_fast.io.jsonl import make_dir
    from baer_fast.io.records import write_pairs, write_signals
    from baer_fast.io.rejects import rejects_for, rejects_path, report_rejects
    from baer_fast.io.resumable import file_sha256

    _check_options(args)
    pairs_path = os.path.join(args.out, "pairs.jsonl")
    created = _missing_folders(args.out)
    rejects = rejects_for(args, out=pairs_path)
    try:
        make_dir(args.out, field="--out")         # before the source is read: it may take a while
        imported = load(args.kind, args.src, rejects=rejects, options=args)
    except BaseException as err:
        failed = _failed(err, rejects, args.src)
        _remove_empty(created)                      # a failed import leaves no empty folder behind
        if failed is err:
            raise
        raise failed from None
    before = {f: file_sha256(os.path.join(args.out, f)) for f in os.listdir(args.out)
              if f == "pairs.jsonl" or f.startswith("signals.") and f.endswith(".jsonl")}
    n = write_pairs(pairs_path, imported.pairs)
    for note in imported.notes:
        logging.getLogger("baer_fast").info(note)
    for why, count in sorted(imported.dropped.items()):    # data left out: shown under -q too
        logging.getLogger("baer_fast").warning("%s: left out %d record(s) of %s: %s", args.kind, count, args.src, why)
    labels = Counter(p.label for p in imported.pairs)
    print(f"pairs.jsonl: {n} pairs (label a {labels['a']}, b {labels['b']}, tie {labels['tie']}, "
          f"unlabelled {labels[None]})")
    replaced = _stale_rejects(rejects_path(pairs_path), rejects)
    skipped = report_rejects(rejects)
    if rejects is not None:
        print(f"skipped {skipped} bad record(s) -> {rejects.path}{replaced}")
    written = set()
    for condition, signals in sorted(imported.banks.items()):
        name = signals_filename(condition)
        write_signals(os.path.join(args.out, name), signals)
        written.add(name)
        n_exp = len({k for s in signals for k in s.experts})
        print(f"{name}: condition {condition}, {len(signals)} pairs, {n_exp} expert{'s' * (n_exp != 1)}")
    stale = sorted(f for f in os.listdir(args.out) if f.startswith("signals.") and f.endswith(".jsonl")
                   and f not in written)
    changed = sorted(f for f in written | {"pairs.jsonl"} if f in before
                     and before[f] != file_sha256(os.path.join(args.out, f)))
    if changed:
        logging.getLogger("baer_fast").warning(
            "replaced %s in %s with this import's, which differ from the earlier ones: heads and scores made "
            "from the old files no longer match them", ", ".join(changed), args.out)
    if stale:
        logging.getLogger("baer_fast").warning(
            "%s also holds %s from an earlier import, not this one, whose pairs are not this pairs.jsonl's "
            "(import into an empty folder, or remove %s)", args.out, ", ".join(stale), "them" if len(stale) > 1 else "it")
    return 0
