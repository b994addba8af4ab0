"""EvalBiasBench (ncsoft/offsetbias, `data/evalbiasbench/biasbench.json`) -> pairs; no judge outputs.

The file is one JSON object, bias category -> list of `{bias, instruction, response1, response2,
label}` (label 1: response1 is better, 2: response2); a JSON list of such records, or a folder of
those files, is read too. Upstream every label is 1: the better response always comes first, so a
judge that always picks the first one scores 100% if the file's order is kept. The chosen response
is therefore placed on a or b by a hash of the id (`chosen_rejected_pair`, as for every
chosen/rejected source), which balances the labels. `subset` = the bias category, so `eval`
reports accuracy per bias. The source has no ids: the id is a hash of the instruction and the two
responses (stable across the upstream file and its halves; `line` in errors = record number).
"""
from __future__ import annotations

import hashlib
from typing import Iterator

from baer_fast.errors import InputError
from baer_fast.io.adapters import Imported
from baer_fast.io.adapters._common import read_json
from baer_fast.io.adapters._rows import (Row, chosen_rejected_pair, convert, files, guarded, record_text, reject,
                                         summary)


def _records(path: str, rejects=None) -> Iterator[Row]:
    data = read_json(path)
    if isinstance(data, dict):
        items = []
        for bias, group in data.items():
            if not isinstance(group, list):
                raise InputError(f"category {bias!r}: expected a list of records, got {type(group).__name__}",
                                 path=path)
            items += [(bias, obj) for obj in group]
    elif isinstance(data, list):
        items = [(None, obj) for obj in data]
    else:
        raise InputError(f"expected a JSON object of categories or a list of records, got {type(data).__name__}",
                         path=path)
    for i, (bias, obj) in enumerate(items, start=1):
        if not isinstance(obj, dict):
            reject(rejects, InputError(f"record {i}: expected an object, got {type(obj).__name__}", path=path,
                                       line=i), record_text(obj))
            continue
        yield Row(path, i, obj if bias is None or "bias" in obj else dict(obj, bias=bias))


def _build(row: Row):
    question, r1, r2 = row.need("instruction"), row.need("response1"), row.need("response2")
    label = row.need("label", (int, str))
    if str(label) not in ("1", "2"):
        raise row.error(f"label {label!r} is not 1 or 2", "label")
    digest = hashlib.sha256("\0".join((question, r1, r2)).encode()).hexdigest()[:16]
    sides = (("response1", r1), ("response2", r2))
    (chosen_field, chosen), (rejected_field, rejected) = sides if str(label) == "1" else sides[::-1]
    return chosen_rejected_pair(f"evalbiasbench-{digest}", question, chosen, rejected,
                                chosen_meta={"source_field": chosen_field},
                                rejected_meta={"source_field": rejected_field},
                                subset=str(row.need("bias")))


def load(src: str, *, rejects=None, options=None) -> Imported:
    paths = [p for p in files(src) if p.endswith((".json", ".json.gz"))]
    if not paths:
        raise InputError("evalbiasbench reads .json files (biasbench.json)", path=src)
    pairs, dropped = convert((row for p in paths for row in guarded(p, _records(p, rejects), rejects)), _build,
                             rejects)
    out = Imported(pairs, dropped=dropped)
    out.notes.append(summary("evalbiasbench", pairs))
    return out
