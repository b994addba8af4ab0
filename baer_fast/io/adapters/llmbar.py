"""LLMBar (princeton-nlp/LLMBar) native layout -> pairs + one signals bank per base LLM.

SRC is a subset folder (`dataset.json` + `evaluators/<backbone>/<protocol>/result.json[.gz]`)
or any folder with subset folders below it (upstream's `Dataset/LLMBar` holds `Natural` and
`Adversarial/<subset>`). Condition = backbone, expert = protocol. Winners in
`results[-1]["swap = False"/"swap = True"]["winner"]` are already canonical ("1" = output_1).
Result items match dataset items by position; under skip a rejected item drops its pair and
its results, a rejected result leaves that run missing.
"""
from __future__ import annotations

import os

from baer_fast.errors import InputError
from baer_fast.io.adapters import Imported, bank_signals
from baer_fast.io.adapters._common import need_dir, read_json
from baer_fast.io.adapters._rows import Row, need_pairs, record_text, reject
from baer_fast.io.adapters.costs import llmbar_cost
from baer_fast.io.records import Pair

_WINNER = {"1": 1.0, "2": 0.0}
_LABEL = {1: "a", 2: "b"}


def subset_dirs(src: str) -> list[str]:
    """Every folder at or below SRC that holds a `dataset.json`, sorted by path. Upstream nests
    them at different depths (`Dataset/LLMBar/Natural`, `Dataset/LLMBar/Adversarial/Neighbor`),
    so pointing at any folder above them imports all of them. A subset's name is its folder's
    name, so two folders of one name are refused (their pair ids would collide)."""
    need_dir(src, "an LLMBar subset (dataset.json) or a folder with subsets below it")
    subs, seen_dirs = [], set()
    for root, dirs, files in os.walk(src, followlinks=True):   # a folder of links to subsets works too
        real = os.path.realpath(root)
        if real in seen_dirs:                 # a link back up the tree: do not walk it twice
            dirs[:] = []
            continue
        seen_dirs.add(real)
        dirs.sort()
        if "dataset.json" in files:
            subs.append(root)
            dirs[:] = []                      # a subset's own folders (evaluators/) hold no subsets
    if not subs:
        raise InputError("no dataset.json in this folder or below it", path=src)
    seen: dict[str, str] = {}
    for folder in subs:
        name = os.path.basename(os.path.normpath(folder))
        if name in seen:
            raise InputError(f"two subsets named {name!r} ({seen[name]} and {folder}); their pair ids "
                             "would collide: import them separately", path=src)
        seen[name] = folder
    return sorted(subs)


def _result_file(folder: str) -> str | None:
    for name in ("result.json.gz", "result.json"):
        if os.path.exists(os.path.join(folder, name)):
            return os.path.join(folder, name)
    return None


def _items(path: str) -> list:
    data = read_json(path)
    if not isinstance(data, list):
        raise InputError(f"expected a JSON list of records, got {type(data).__name__}", path=path)
    return data


def _row(path: str, index: int, item) -> Row:
    if not isinstance(item, dict):
        raise InputError(f"record {index + 1}: expected an object, got {type(item).__name__}", path=path,
                         line=index + 1)
    return Row(path, index + 1, item)                # line = item number


def _runs(item, *, path: str, index: int) -> list:
    row = _row(path, index, item)
    results = row.need("results", list)
    last = results[-1] if results else None
    if not isinstance(last, dict):
        raise row.error("expected a non-empty list of result objects", "results")
    runs = []
    for key in ("swap = False", "swap = True"):
        run = last.get(key) or {}
        winner = run.get("winner") if isinstance(run, dict) else None
        if winner is not None and winner not in _WINNER:
            raise row.error(f"unknown winner {winner!r}", key)
        runs.append(_WINNER.get(winner))
    return runs


def _pairs(data_path: str, subset: str, rejects) -> dict:
    """{item index: Pair} of a subset's dataset.json; under skip a bad item is rejected and left out."""
    pairs = {}
    for i, item in enumerate(_items(data_path)):
        try:
            row = _row(data_path, i, item)
            label = row.need("label", int)
            if label not in _LABEL:
                raise row.error(f"label {label!r} is not 1 or 2", "label")
            pairs[i] = Pair(f"{subset}-{i:04d}", row.need("input"), row.need("output_1"), row.need("output_2"),
                            label=_LABEL[label], subset=subset)
        except InputError as err:
            reject(rejects, err, record_text(item))
    return pairs


def _result_runs(path: str, items: list, pairs: dict, protocol: str, rejects) -> tuple[list, list]:
    """Runs and estimated costs per kept pair from one result file (a rejected result: runs missing)."""
    results = _items(path)
    if len(results) != len(items):
        raise InputError(f"{len(results)} results for {len(items)} pairs", path=path)
    runs, costs = [], []
    for i in pairs:
        try:
            runs.append(_runs(results[i], path=path, index=i))
        except InputError as err:
            reject(rejects, err, record_text(results[i]))
            runs.append([None, None])
            costs.append(None)
            continue
        costs.append(llmbar_cost(items[i], results[i], protocol))
    return runs, costs


def load_subset(folder: str, rejects=None):
    subset = os.path.basename(os.path.normpath(folder))
    data_path = os.path.join(folder, "dataset.json")
    items = _items(data_path)
    pairs = _pairs(data_path, subset, rejects)
    banks: dict[str, dict[str, list]] = {}
    costs: dict[str, dict[str, list]] = {}        # estimated from the kept texts (adapters/costs.py)
    ev_root = os.path.join(folder, "evaluators")
    for backbone in sorted(os.listdir(ev_root)) if os.path.isdir(ev_root) else []:
        for protocol in sorted(os.listdir(os.path.join(ev_root, backbone))):
            path = _result_file(os.path.join(ev_root, backbone, protocol))
            if path is None:
                continue
            runs, cost = _result_runs(path, items, pairs, protocol, rejects)
            banks.setdefault(backbone, {})[protocol] = runs
            costs.setdefault(backbone, {})[protocol] = cost
    return list(pairs.values()), banks, costs


def load(src: str, *, rejects=None, options=None) -> Imported:
    all_pairs, per_backbone = [], {}
    for folder in subset_dirs(src):
        pairs, banks, costs = load_subset(folder, rejects)
        for backbone, runs in banks.items():
            per_backbone.setdefault(backbone, []).append((pairs, runs, costs[backbone]))
        all_pairs += pairs
    need_pairs(all_pairs, {}, rejects)
    out = Imported(all_pairs)
    for backbone, parts in per_backbone.items():
        out.banks[backbone] = [s for pairs, runs, costs in parts for s in bank_signals(pairs, runs, backbone, costs)]
    subsets = sorted({p.subset for p in all_pairs})
    out.notes.append(f"llmbar: {len(all_pairs)} pairs in {len(subsets)} subset(s) "
                     f"({', '.join(subsets)}); {len(out.banks)} backbone(s)")
    return out
