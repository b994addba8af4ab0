"""Rows of local dataset files for the pair importers: located errors and the skip policy.

`rows(src)` yields `Row(path, line, obj, raw)` from `.jsonl[.gz]` (the project's JSONL reader,
exact lines), `.json` (a list of objects; `line` = record number), `.csv` (the line a record
starts on; every cell is text, quoted cells may span lines) and `.parquet` (line = row number,
read by pyarrow: the `[data]` extra). A folder yields its files of those kinds in name order.
`convert(rows, build, rejects)` turns each row into a Pair (or several, or a drop reason) and
keeps the InputError of a bad row in `rejects` (`--on-error skip`), with the record's text, or
raises it; under skip a file that cannot be read on (empty, no gzip, cut short) is one reject.
"""
from __future__ import annotations

import csv
import glob
import hashlib
import io
import json
import logging
import os
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

from baer_fast.errors import InputError

SUFFIXES = (".jsonl", ".jsonl.gz", ".json", ".json.gz", ".csv", ".parquet")


@dataclass(frozen=True)
class Row:
    path: str
    line: int
    obj: dict
    raw: str | bytes | None = None

    def need(self, name: str, types=str):
        """The field `name`, of `types`; a located InputError when absent or mistyped."""
        if name not in self.obj or self.obj[name] is None:
            raise InputError("missing required field", path=self.path, line=self.line, field=name)
        val = self.obj[name]
        if not isinstance(val, types) or isinstance(val, bool):
            want = types.__name__ if isinstance(types, type) else "/".join(t.__name__ for t in types)
            raise InputError(f"expected {want}, got {type(val).__name__}", path=self.path, line=self.line,
                             field=name)
        return val

    def error(self, message: str, field: str | None = None) -> InputError:
        return InputError(message, path=self.path, line=self.line, field=field)

    def text(self) -> str | bytes:
        """The record as read, for the rejects file: its line (JSONL; a ragged CSV line), else its
        fields as JSON text (.json, .parquet, CSV cells by header)."""
        return self.raw if self.raw is not None else record_text(self.obj)


def record_text(obj) -> str:
    """A parsed record as JSON text (a value JSON lacks as its text; an unpaired surrogate escaped)."""
    text = json.dumps(obj, ensure_ascii=False, default=str)
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def reject(rejects, err: InputError, raw: str | bytes | None = None) -> None:
    """Under `--on-error skip` keep `err` and the record's text in `rejects`; otherwise raise `err`."""
    if rejects is None:
        raise err
    rejects.add(err, raw)


def files(src: str, keep: Callable[[str], bool] | None = None) -> list[str]:
    """`src` itself, or the data files of a folder (name order) that `keep` accepts."""
    if os.path.isdir(src):
        found = sorted(p for p in glob.glob(os.path.join(src, "**", "*"), recursive=True)
                       if p.endswith(SUFFIXES) and os.path.isfile(p) and (keep is None or keep(p)))
        if not found:
            raise InputError(f"no data files ({', '.join(SUFFIXES)}) in this folder", path=src)
        return found
    if not os.path.exists(src):
        raise InputError("file not found", path=src)
    if not src.endswith(SUFFIXES):
        raise InputError(f"unknown file type; expected one of {', '.join(SUFFIXES)}", path=src)
    return [src]


def skipping(drop: Callable[[str], bool]) -> tuple[Callable[[str], bool], list]:
    """A `keep` predicate for files()/rows() that sets aside the paths `drop` names, and the list
    they are set aside in (filled as the folder is read), for the import's note."""
    skipped: list = []

    def keep(path: str) -> bool:
        if drop(path):
            skipped.append(path)
            return False
        return True
    return keep, skipped


def file_stem(path: str) -> str:
    """A data file's name up to its first dot (`test.jsonl.gz` -> `test`): the part ids are built from."""
    return os.path.basename(path).split(".")[0]


def rows(src: str, rejects=None, keep: Callable[[str], bool] | None = None) -> Iterator[Row]:
    for path in files(src, keep):
        yield from guarded(path, _file_rows(path, rejects), rejects)


def _file_rows(path: str, rejects) -> Iterator[Row]:
    if path.endswith((".jsonl", ".jsonl.gz")):
        from baer_fast.io.jsonl import iter_jsonl_raw
        for line, obj, raw in iter_jsonl_raw(path, rejects):
            yield Row(path, line, obj, raw)
    elif path.endswith((".json", ".json.gz")):
        yield from json_rows(path, rejects)
    elif path.endswith(".csv"):
        yield from _csv_rows(path, rejects)
    else:
        yield from _parquet_rows(path)


def guarded(path: str, source: Iterable[Row], rejects) -> Iterator[Row]:
    """The rows of file `path`; under `--on-error skip` a file that cannot be read on (empty, every
    line bad, not gzip, cut short) is named in a warning and kept in `rejects` as one entry (not
    again when its bad lines are there already), and the import goes on with the next file."""
    n_before, n_rows = len(rejects) if rejects is not None else 0, 0
    try:
        for row in source:
            n_rows += 1
            yield row
    except InputError as err:
        if rejects is None:
            raise
        log = logging.getLogger("baer_fast")
        if err.line is None and len(rejects) > n_before:        # "no valid records": its lines are kept
            log.warning("skipped %s: every record in it is bad (%d rejected)", path, len(rejects) - n_before)
        else:
            rejects.add(err)
            log.warning("skipped %s%s: %s", "the rest of " if n_rows else "", path, err.message)


def json_rows(path: str, rejects=None) -> Iterator[Row]:
    """The objects of a JSON list file (line = record number); under skip a non-object is rejected."""
    from baer_fast.io.adapters._common import read_json

    data = read_json(path)
    if not isinstance(data, list):
        raise InputError(f"expected a JSON list of records, got {type(data).__name__}", path=path)
    for i, obj in enumerate(data, start=1):
        if isinstance(obj, dict):
            yield Row(path, i, obj)
        else:
            reject(rejects, InputError(f"record {i}: expected an object, got {type(obj).__name__}",
                                       path=path, line=i), record_text(obj))


def _csv_rows(path: str, rejects=None) -> Iterator[Row]:
    """Records of a CSV file (header row first) as text cells, located at the line each starts on.
    The stdlib reader, not pyarrow's: cells keep their text (an answer "42" is not an integer)
    and quoted cells may hold newlines in a file of any size."""
    from baer_fast.io.jsonl import lfs_pointer

    csv.field_size_limit(2**31 - 1)          # one long response is a cell, not an error
    lfs = lfs_pointer(path)
    if lfs is not None:
        raise lfs
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            reader = csv.reader(f)
            header = next(reader, None)
            if not header:
                raise InputError("empty CSV file: expected a header row", path=path, line=1)
            start = reader.line_num + 1
            for cells in reader:
                if len(cells) == len(header):
                    yield Row(path, start, dict(zip(header, cells)))
                elif cells:                    # a blank line is no record
                    err = InputError(f"expected {len(header)} cells (the header's), got {len(cells)}",
                                     path=path, line=start)
                    if rejects is None:
                        raise err
                    rejects.add(err, _csv_line(cells))
                start = reader.line_num + 1
    except UnicodeDecodeError:
        raise InputError("not UTF-8 text (save the file as UTF-8)", path=path, line=reader.line_num + 1) from None
    except csv.Error as e:
        raise InputError(f"malformed CSV: {e}", path=path, line=reader.line_num) from None


def _csv_line(cells: list) -> str:
    out = io.StringIO()
    csv.writer(out).writerow(cells)
    return out.getvalue().rstrip("\r\n")


def _parquet_rows(path: str) -> Iterator[Row]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise InputError("reading .parquet needs pyarrow: pip install 'baer-fast[data]'", path=path) from None
    from baer_fast.io.jsonl import lfs_pointer

    try:
        table = pq.read_table(path)
    except Exception as e:      # pyarrow raises ArrowInvalid/OSError subclasses with a message
        raise lfs_pointer(path) or InputError(f"cannot read: {e}", path=path) from None
    for i, obj in enumerate(table.to_pylist(), start=1):
        yield Row(path, i, obj)


def convert(source: Iterable[Row], build: Callable, rejects=None) -> tuple[list, Counter]:
    """[Pair] from build(row) -> Pair | [Pair] | str (a drop reason); ids unique; counts of drop
    reasons. A row that gives several pairs is kept or rejected whole. No pair at all is an error."""
    pairs, dropped = collect(source, build, rejects)
    need_pairs(pairs, dropped, rejects)
    return pairs, dropped


def collect(source: Iterable[Row], build: Callable, rejects=None, seen: dict | None = None,
            id_field: str = "id") -> tuple[list, Counter]:
    """convert without its need for a pair; `seen` (id -> "path:line") carries ids across calls (one
    id space over several files); a blank or duplicate id is a located error on the source's `id_field`."""
    pairs, dropped, seen = [], Counter(), {} if seen is None else seen
    for row in source:
        try:
            try:
                out = build(row)
            except ValueError as e:      # a conversation Pair refused (records.as_conversation)
                raise row.error(str(e), "question") from None
            if isinstance(out, str):
                dropped[out] += 1
                continue
            built = out if isinstance(out, list) else [out]
            here = f"{row.path}:{row.line}"
            for k, pair in enumerate(built):
                if not pair.id.strip():          # the pairs reader refuses it: refuse it here, located
                    raise row.error("blank id: a pair id must not be empty", id_field)
                first = seen.get(pair.id) or (here if any(p.id == pair.id for p in built[:k]) else None)
                if first:
                    raise row.error(f"duplicate id {pair.id!r} (first at {first})", id_field)
        except InputError as err:
            reject(rejects, err, row.text())
            continue
        seen.update((pair.id, here) for pair in built)
        pairs.extend(built)
    return pairs, dropped


def need_pairs(pairs: list, dropped: Counter, rejects=None) -> None:
    """An import that gives no pair at all is an error (the command names SRC and the rejects)."""
    if not pairs:
        raise InputError(f"no pairs imported ({sum(dropped.values())} dropped, {len(rejects or ())} rejected)")


def a_is_chosen(pair_id: str) -> bool:
    """Which side the chosen response is shown on: a hash of the id (deterministic, balanced)."""
    return hashlib.sha256(f"baer-ab\0{pair_id}".encode()).digest()[0] % 2 == 0


def chosen_rejected_pair(pair_id: str, question, chosen: str, rejected: str, *, meta: dict | None = None,
                         chosen_meta: dict | None = None, rejected_meta: dict | None = None, **fields):
    """A Pair with chosen/rejected on the sides `a_is_chosen` picks; meta records each side's origin
    (origin_a/origin_b, swapped with the candidates) and `<key>_a/_b` from chosen_/rejected_meta.
    Identical texts are kept with label "tie" (no preference to learn)."""
    from baer_fast.io.records import Pair

    first = a_is_chosen(pair_id)
    a, b = (chosen, rejected) if first else (rejected, chosen)
    sides = (("chosen", chosen_meta or {}), ("rejected", rejected_meta or {}))
    (oa, ma), (ob, mb) = sides if first else sides[::-1]
    out = dict(meta or {}, origin_a=oa, origin_b=ob)
    out.update({f"{k}_a": v for k, v in ma.items()})
    out.update({f"{k}_b": v for k, v in mb.items()})
    label = "tie" if chosen == rejected else ("a" if first else "b")
    return Pair(pair_id, question, a, b, label=label, meta=out, **fields)


def summary(kind: str, pairs: list) -> str:
    """One line: pairs, label counts (a/b balance), multi-turn pairs: a conversation as question, or
    conversations that differ before the final reply (MT-Bench's turn 2, Arena follow-ups), whose
    responses carry the later turns. Drops are the command's warning (Imported.dropped)."""
    labels = Counter(p.label for p in pairs)
    diverged = sum(bool(p.meta.get("diverged")) for p in pairs)
    multi = sum(not isinstance(p.question, str) or bool(p.meta.get("diverged")) for p in pairs)
    return (f"{kind}: {len(pairs)} pairs (label a {labels['a']}, b {labels['b']}, tie {labels['tie']}; "
            f"{multi} multi-turn" + (f", {diverged} of them differ before the final reply" if diverged else "") + ")")
