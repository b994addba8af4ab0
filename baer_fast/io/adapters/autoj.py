"""Auto-J pairwise test (GAIR-NLP/auto-j) + Auto-J-13B verdicts in both orders -> one bank.

Labels: 0 = response 1 better, 1 = response 2, 2 = tie. The exchange file is coded by
DISPLAYED position, so 0 there means the original response 2 won. The three files are matched
line by line (non-blank lines); under skip a rejected pair line drops that pair and its verdicts,
a rejected verdict line leaves that run missing.
"""
from __future__ import annotations

import glob
import os

from baer_fast.errors import InputError
from baer_fast.io.adapters import Imported, bank_signals
from baer_fast.io.adapters._common import field, need_dir, one_file, read_json, read_jsonl
from baer_fast.io.adapters._rows import Row, need_pairs, reject
from baer_fast.io.records import Pair

_LABEL = {0: "a", 1: "b", 2: "tie"}
_U_ORIG = {0: 1.0, 1: 0.0, 2: 0.5}
_U_EXCH = {0: 0.0, 1: 1.0, 2: 0.5}


def _upstream_lines(data_path: str, n: int) -> list[int]:
    """Each pair's line in upstream's file (0-based): the shared copy's index file, else its own lines."""
    index_files = glob.glob(os.path.join(os.path.dirname(data_path), "upstream_line_index*.json"))
    if not index_files:
        return list(range(n))
    index = read_json(index_files[0])
    lines = field(index, "upstream_line_index_0based", path=index_files[0]) if isinstance(index, dict) else None
    if not isinstance(lines, list) or not all(isinstance(i, int) for i in lines):
        raise InputError("expected {\"upstream_line_index_0based\": [line numbers]}", path=index_files[0])
    if len(lines) != n:
        raise InputError(f"{len(lines)} upstream line numbers for {n} pairs", path=index_files[0])
    return lines


def _pair(row: Row, upstream: int) -> Pair:
    label = row.need("label", int)
    if label not in _LABEL:
        raise row.error(f"label {label!r} is not 0, 1 or 2", "label")
    return Pair(f"autoj-{upstream:04d}", row.need("prompt"), row.need("response 1"), row.need("response 2"),
                label=_LABEL[label], subset=row.need("scenario"))


def _u(slot, table: dict):
    value = slot[1].get("output") if slot[1] is not None else None
    return table.get(value) if isinstance(value, int) and not isinstance(value, bool) else None


def load(src: str, *, rejects=None, options=None) -> Imported:
    need_dir(src, "Auto-J testdata_pairwise*.jsonl and pairwise_*output*.jsonl")
    data_path = one_file(src, "testdata_pairwise*.jsonl")
    slots = read_jsonl(data_path, rejects)
    upstream = _upstream_lines(data_path, len(slots))
    pairs, kept = [], []
    for k, (line, obj) in enumerate(slots):
        if obj is None:
            continue
        row = Row(data_path, line, obj)
        try:
            pairs.append(_pair(row, upstream[k]))
        except InputError as err:
            reject(rejects, err, row.text())
            continue
        kept.append(k)
    orig = read_jsonl(one_file(src, "pairwise_example_output*.jsonl"), rejects)
    exch = read_jsonl(one_file(src, "pairwise_exchange_example_output*.jsonl"), rejects)
    if not len(orig) == len(exch) == len(slots):
        raise InputError(f"output files hold {len(orig)}/{len(exch)} rows for {len(slots)} pairs", path=src)
    need_pairs(pairs, {}, rejects)
    runs = [[_u(orig[k], _U_ORIG), _u(exch[k], _U_EXCH)] for k in kept]
    out = Imported(pairs, {"autoj-13b": bank_signals(pairs, {"autoj-13b": runs}, "autoj-13b")})
    n_tie = sum(p.label == "tie" for p in pairs)
    out.notes.append(f"autoj: {len(pairs)} pairs ({n_tie} tie labels, kept but excluded from accuracy)")
    return out
