"""Auto-J pairwise test (GAIR-NLP/auto-j) + Auto-J-13B verdicts in both orders -> one bank.

Labels: 0 = response 1 better, 1 = response 2, 2 = tie. The exchange file is coded by
DISPLAYED position, so 0 there means the original response 2 won.
"""
from __future__ import annotations

import glob
import json
import os

from baer_fast.errors import InputError
from baer_fast.io.adapters import Imported, bank_signals
from baer_fast.io.adapters._common import need_dir, one_file, read_jsonl
from baer_fast.io.adapters._rows import Row
from baer_fast.io.records import Pair

_LABEL = {0: "a", 1: "b", 2: "tie"}
_U_ORIG = {0: 1.0, 1: 0.0, 2: 0.5}
_U_EXCH = {0: 0.0, 1: 1.0, 2: 0.5}



def load(src: str) -> Imported:
    need_dir(src, "Auto-J testdata_pairwise*.jsonl and pairwise_*output*.jsonl")
    data_path = one_file(src, "testdata_pairwise*.jsonl")
    rows = read_jsonl(data_path)
    upstream = list(range(len(rows)))
    index_files = glob.glob(os.path.join(os.path.dirname(data_path), "upstream_line_index*.json"))
    if index_files:
        with open(index_files[0], encoding="utf-8") as fh:
            upstream = json.load(fh)["upstream_line_index_0based"]
    if len(upstream) != len(rows):
        raise InputError(f"{len(upstream)} upstream line numbers for {len(rows)} pairs", path=index_files[0])
    pairs = []
    for line, r in enumerate(rows, start=1):
        row = Row(data_path, line, r)
        label = row.need("label", int)
        if label not in _LABEL:
            raise InputError(f"label {label!r} is not 0, 1 or 2", path=data_path, line=line, field="label")
        pairs.append(Pair(f"autoj-{upstream[line - 1]:04d}", row.need("prompt"), row.need("response 1"),
                          row.need("response 2"), label=_LABEL[label], subset=row.need("scenario")))
    orig = read_jsonl(one_file(src, "pairwise_example_output*.jsonl"))
    exch = read_jsonl(one_file(src, "pairwise_exchange_example_output*.jsonl"))
    if not len(orig) == len(exch) == len(pairs):
        raise InputError(f"output files hold {len(orig)}/{len(exch)} rows for {len(pairs)} pairs", path=src)
    runs = [[_U_ORIG.get(o.get("output")), _U_EXCH.get(e.get("output"))] for o, e in zip(orig, exch)]
    out = Imported(pairs, {"autoj-13b": bank_signals(pairs, {"autoj-13b": runs}, "autoj-13b")})
    n_tie = sum(p.label == "tie" for p in pairs)
    out.notes.append(f"autoj: {len(pairs)} pairs ({n_tie} tie labels, kept but excluded from accuracy)")
    return out
