"""JudgeBench (ScalerLab/JudgeBench) pairs + published judge outputs -> one bank.

SRC holds `data/*.jsonl` (pairs) and `outputs/*.jsonl[.gz]` (one judge per file, both
orders in `judgments[0]` / `judgments[1]`, the second coded by DISPLAYED position).
All judges of the response set form one condition, named after the pair file's
response model. Reward models whose two scores are exactly equal are read as ties
(upstream wrote "B>A" in both orders for them).
"""
from __future__ import annotations

import glob
import os
import re

from baer_fast.errors import InputError
from baer_fast.io.adapters import Imported, bank_signals
from baer_fast.io.adapters._common import field, need_dir, read_jsonl
from baer_fast.io.records import Pair

_DECISION = {"A>B": 1.0, "B>A": 0.0, "A=B": 0.5}
_LABEL = {"A>B": "a", "B>A": "b", "A=B": "tie"}


def category(source: str) -> str:
    """JudgeBench source -> the paper's category (knowledge, reasoning, math, coding)."""
    if source.startswith("mmlu-pro"):
        return "knowledge"
    return {"livebench-reasoning": "reasoning", "livebench-math": "math",
            "livecodebench": "coding"}.get(source, source)


def expert_name(path: str) -> str:
    base = re.sub(r"\.jsonl(\.gz)?$", "", os.path.basename(path))
    parts = dict(kv.split("=", 1) for kv in base.split(",") if "=" in kv)
    return f"{parts.get('judge_name', 'judge')}:{parts.get('judge_model', base)}"


def _decision_u(judgment: dict, *, flip: bool) -> float | None:
    u = _DECISION.get(judgment.get("decision"))
    scores = (judgment.get("judgment") or {}).get("scores")
    if isinstance(scores, list) and len(scores) == 2 and scores[0] == scores[1] and scores[0] is not None:
        u = 0.5
    if u is None:
        return None
    return 1.0 - u if flip else u


def load(src: str) -> Imported:
    need_dir(src, "JudgeBench data/ and outputs/")
    pair_files = sorted(glob.glob(os.path.join(src, "data", "*.jsonl")))
    if len(pair_files) != 1:
        raise InputError(f"expected exactly one data/*.jsonl pair file, found {len(pair_files)}", path=src)
    rows = read_jsonl(pair_files[0])
    pairs = []
    for line, r in enumerate(rows, start=1):
        label = field(r, "label", path=pair_files[0], line=line)
        if label not in _LABEL:
            raise InputError(f"unknown label {label!r}", path=pair_files[0], line=line, field="label")
        pairs.append(Pair(r["pair_id"], r["question"], r["response_A"], r["response_B"],
                          label=_LABEL[label], subset=category(r["source"]),
                          category=category(r["source"]), meta={"source": r["source"]}))
    index = {p.id: i for i, p in enumerate(pairs)}
    runs_by_expert = {}
    for path in sorted(glob.glob(os.path.join(src, "outputs", "*.jsonl*"))):
        runs = [[None, None] for _ in pairs]
        for line, r in enumerate(read_jsonl(path), start=1):
            i = index.get(r.get("pair_id"))
            if i is None:
                raise InputError(f"pair_id {r.get('pair_id')!r} is not in the pair file", path=path, line=line)
            j = field(r, "judgments", path=path, line=line)
            runs[i] = [_decision_u(j[0], flip=False), _decision_u(j[1], flip=True)]
        runs_by_expert[expert_name(path)] = runs
    model = re.search(r"response_model=([^,.]+(?:\.[^,.]+)*?)\.jsonl$", os.path.basename(pair_files[0]))
    condition = f"judgebench-{model.group(1) if model else 'bank'}"
    out = Imported(pairs, {condition: bank_signals(pairs, runs_by_expert, condition)})
    out.notes.append(f"judgebench: {len(pairs)} pairs, {len(runs_by_expert)} judges -> condition {condition}")
    return out
