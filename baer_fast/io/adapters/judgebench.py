"""JudgeBench (ScalerLab/JudgeBench) pairs + published judge outputs -> one bank per response set.

SRC holds `data/*.jsonl` (pairs) and `outputs/*.jsonl[.gz]` (one judge per file, both
orders in `judgments[0]` / `judgments[1]`, the second coded by DISPLAYED position), as in a
GitHub checkout; a hub snapshot's `data/*.parquet` (splits gpt and claude) gives pairs only.
All judges of a response set form one condition, named after its pair file's response
model (or its rows' `response_model`); upstream ships two sets (GPT-4o, Claude 3.5 Sonnet),
each its own condition. Reward
models whose two scores are exactly equal are read as ties (upstream wrote "B>A" in both
orders for them).
"""
from __future__ import annotations

import glob
import os
import re

from baer_fast.errors import InputError
from baer_fast.io.adapters import Imported, bank_signals
from baer_fast.io.adapters._common import field, need_dir, read_jsonl
from baer_fast.io.adapters._rows import collect, need_pairs, record_text, reject, rows
from baer_fast.io.records import Pair

_DECISION = {"A>B": 1.0, "B>A": 0.0, "A=B": 0.5}
_LABEL = {"A>B": "a", "B>A": "b", "A=B": "tie"}


def category(source: str) -> str:
    """JudgeBench source -> the paper's category (knowledge, reasoning, math, coding)."""
    if source.startswith("mmlu-pro"):
        return "knowledge"
    return {"livebench-reasoning": "reasoning", "livebench-math": "math",
            "livecodebench": "coding"}.get(source, source)


def _stem(path: str) -> str:
    return re.sub(r"\.jsonl(\.gz)?$", "", os.path.basename(path))


def expert_name(path: str) -> str:
    base = _stem(path)
    parts = dict(kv.split("=", 1) for kv in base.split(",") if "=" in kv)
    return f"{parts.get('judge_name', 'judge')}:{parts.get('judge_model', base)}"


def _decision_u(judgment: dict, *, flip: bool) -> float | None:
    u = _DECISION.get(judgment.get("decision"))
    inner = judgment.get("judgment")
    scores = inner.get("scores") if isinstance(inner, dict) else None
    if isinstance(scores, list) and len(scores) == 2 and scores[0] == scores[1] and scores[0] is not None:
        u = 0.5
    if u is None:
        return None
    return 1.0 - u if flip else u


def _pair(row) -> Pair:
    label = row.need("label")
    if label not in _LABEL:
        raise row.error(f"unknown label {label!r} (expected {', '.join(_LABEL)})", "label")
    source = row.need("source")
    return Pair(str(row.need("pair_id", (str, int))), row.need("question"), row.need("response_A"),
                row.need("response_B"), label=_LABEL[label], subset=category(source),
                category=category(source), meta={"source": source})


def _pairs(pair_file: str, rejects, seen: dict) -> tuple[list, set]:
    """The pairs of one response set (ids unique across sets: `seen` maps id -> where) and the
    response models its rows name."""
    models = set()

    def build(row):
        pair = _pair(row)
        if isinstance(row.obj.get("response_model"), str):
            models.add(row.obj["response_model"])
        return pair
    pairs, _ = collect(rows(pair_file, rejects), build, rejects, seen, id_field="pair_id")
    return pairs, models


def _runs(path: str, index: dict, rejects) -> list:
    """One judge's runs per pair (pair order); a verdict line for no imported pair, or of the wrong
    shape, is an error (under skip: a reject, and that pair's runs stay missing)."""
    runs = [[None, None] for _ in index]
    for line, r in read_jsonl(path, rejects):
        if r is None:
            continue
        try:
            i = index.get(r.get("pair_id")) if isinstance(r.get("pair_id"), (str, int)) else None
            if i is None:
                raise InputError(f"pair_id {r.get('pair_id')!r} is not a pair of the pair file (or its row "
                                 "there was rejected)", path=path, line=line, field="pair_id")
            j = field(r, "judgments", path=path, line=line)
            if not (isinstance(j, list) and len(j) == 2 and all(isinstance(x, dict) for x in j)):
                raise InputError("expected the two orders' judgments: a list of two objects",
                                 path=path, line=line, field="judgments")
        except InputError as err:
            reject(rejects, err, record_text(r))
            continue
        runs[i] = [_decision_u(j[0], flip=False), _decision_u(j[1], flip=True)]
    return runs


def _load_set(pair_file: str, output_files: list[str], rejects=None, seen: dict | None = None):
    pairs, models = _pairs(pair_file, rejects, {} if seen is None else seen)
    index = {p.id: i for i, p in enumerate(pairs)}
    runs_by_expert = {expert_name(path): _runs(path, index, rejects) for path in output_files}
    model = re.search(r"response_model=([^,.]+(?:\.[^,.]+)*?)\.jsonl$", os.path.basename(pair_file))
    name = model.group(1) if model else (models.pop() if len(models) == 1 else "bank")
    return pairs, runs_by_expert, f"judgebench-{name}"


def load(src: str, *, rejects=None, options=None) -> Imported:
    """One condition per pair file of `data/` (upstream ships one per response model: GPT-4o and
    Claude 3.5 Sonnet). A judge's output file belongs to the pair file whose name it extends
    (`<pair file's name>,judge_name=...`); with a single pair file, every output belongs to it."""
    need_dir(src, "JudgeBench data/ and outputs/")
    pair_files = sorted(glob.glob(os.path.join(src, "data", "*.jsonl")) + glob.glob(os.path.join(src, "data", "*.parquet")))
    if not pair_files:
        raise InputError("no data/*.jsonl (GitHub checkout) or data/*.parquet (hub snapshot) pair file", path=src)
    output_files = sorted(glob.glob(os.path.join(src, "outputs", "*.jsonl*")))
    owned: dict[str, list[str]] = {f: [] for f in pair_files}
    for path in output_files:
        owners = [f for f in pair_files if len(pair_files) == 1 or _stem(path).startswith(_stem(f) + ",")]
        if not owners:
            raise InputError("judge output whose name extends no data/ pair file's name "
                             f"({', '.join(_stem(f) for f in pair_files)})", path=path)
        owned[owners[0]].append(path)
    all_pairs, banks, seen, notes, conditions = [], {}, {}, [], set()
    for pair_file in pair_files:
        pairs, runs_by_expert, condition = _load_set(pair_file, owned[pair_file], rejects, seen)
        if condition in conditions:
            raise InputError(f"two pair files give condition {condition}; import them separately", path=pair_file)
        conditions.add(condition)
        if not pairs:
            notes.append(f"no pairs of {condition} (every row rejected)")
        elif runs_by_expert:
            banks[condition] = bank_signals(pairs, runs_by_expert, condition)
            notes.append(f"{len(pairs)} pairs, {len(runs_by_expert)} judge{'s' * (len(runs_by_expert) != 1)} "
                         f"-> condition {condition}")
        else:
            notes.append(f"{len(pairs)} pairs of {condition} (no judge outputs: pairs only)")
        all_pairs += pairs
    need_pairs(all_pairs, {}, rejects)
    out = Imported(all_pairs, banks)
    out.notes.append("judgebench: " + "; ".join(notes))
    return out
