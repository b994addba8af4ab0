"""What an expert costs per pair, and what a budget means (docs/cost.md, section 1).

Costs per (pair, expert) come from `meta.expert_cost`, a `--costs FILE` override (expert -> tokens per
pair), or one unit per expert. A subset costs the sum of its experts' plus that of the bank experts
they are computed from and lack, plus, on a bank whose prompts share prefixes (`meta.prefill_shared`),
the parts of shared nodes its experts' cells do not carry (`subset_cost`). Used by the budget search.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from baer_fast.errors import InputError


@dataclass(frozen=True)
class CostModel:
    decode_weight: float = 1.0     # a decoded token counts this many prefilled tokens
    default_unit: float = 1.0      # cost per pair of an expert when nothing records its cost
    repeats: int = 3               # fold assignments averaged by the subset search
    rounding: int = 9              # CV accuracies compared after rounding (ties are real ties)
    criterion: str = "logloss"     # what the search ranks first: CV "logloss" (smoother on small dev sets) or "accuracy"
    tolerance: float = 0.01        # CV accuracy a subset may lose against the full stack and still count as near it
    noise_z: float = 1.0           # margin for fold noise, in standard errors of the paired CV gap
    outer_repeats: int = 2         # repeats of the outer 5-fold CV that measures the search itself (0: skip)


def parse_budget(text: str) -> tuple[str, float]:
    """'0.33' -> ('fraction', 0.33); '1/3' -> ('fraction', 1/3); 'tokens=N' -> ('tokens', N)."""
    raw = str(text).strip()
    kind, _, value = raw.partition("=") if "=" in raw else ("fraction", "", raw)
    try:
        num, _, den = value.partition("/") if kind == "fraction" else (value, "", "")
        x = float(num) / float(den) if den else float(num)
    except (ValueError, ZeroDivisionError):
        x = math.nan
    if kind not in ("fraction", "tokens") or not math.isfinite(x) or x <= 0 or (kind == "fraction" and x > 1):
        raise InputError(f"--budget {raw!r}: expected a fraction in (0, 1] of the full bank's cost "
                         "(e.g. 0.33 or 1/3) or tokens=N per pair", field="--budget")
    return kind, x


def read_costs_file(path: str) -> dict:
    """--costs FILE: {"expert": tokens per pair, ...}."""
    try:
        with open(path, encoding="utf-8") as fh:
            d = json.load(fh)
    except OSError as e:
        raise InputError(f"cannot read: {e.strerror or e}", path=path) from None
    except ValueError as e:
        raise InputError(f"not valid JSON: {e}", path=path) from None
    if not isinstance(d, dict):
        raise InputError("expected an object {expert: tokens per pair}", path=path)
    for k, v in d.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise InputError("expected a non-negative number of tokens per pair", path=path, field=k)
    return {k: float(v) for k, v in d.items()}


def record_cost(rec, expert: str, model: CostModel = CostModel()) -> float | None:
    c = (rec.meta.get("expert_cost") or {}).get(expert)
    if not isinstance(c, dict):
        return None
    return float(c.get("prefilled", 0)) + model.decode_weight * float(c.get("decoded", 0))


def expert_sources(records: Sequence, experts: Sequence[str]) -> dict:
    """{expert: the expert its runs are computed from}, as the runtime recorded it (`from` in
    meta.expert_cost: a native verdict is read from its generative expert's texts, PriDe and
    CalibraEval transform their source's runs); only sources that are in `experts`."""
    out = {}
    for r in records:
        for e, c in (r.meta.get("expert_cost") or {}).items():
            if e in experts and isinstance(c, dict) and c.get("from") in experts and e not in out:
                out[e] = c["from"]
    return out


def generating(records: Sequence, experts: Sequence[str]) -> list[str]:
    """Those of `experts` that generate text, as the records show it: named in `meta.generation` (a
    runtime bank records each generative expert's budgets there) or read from one (`from` in
    meta.expert_cost: a native verdict). Empty on imported banks, which record neither."""
    out = set()
    for r in records:
        gen, cost = r.meta.get("generation") or {}, r.meta.get("expert_cost") or {}
        out |= {e for e in experts if e in gen or (isinstance(cost.get(e), dict) and cost[e].get("from") in gen)}
    return sorted(out)


@dataclass(frozen=True)
class SharedPrefill:
    """Prompt nodes several experts pass through (`meta.prefill_shared`, runtime banks), per pair on
    average: `sets` {experts: tokens}; `parts` {expert: tokens of its cells from those nodes}."""
    sets: dict
    parts: dict

    def to_json(self) -> dict:
        return {"sets": [[t, list(e)] for e, t in self.sets.items()], "parts": dict(self.parts)}

    @classmethod
    def from_json(cls, d: dict | None) -> "SharedPrefill | None":
        return None if not d else cls({tuple(e): float(t) for t, e in d["sets"]}, dict(d["parts"]))

    def extra(self, need: set) -> float:
        """What running `need` prefills beyond its cells: the shared nodes any of it passes through,
        whole, less the parts its cells already carry (0 for the bank that recorded them)."""
        return sum(t for e, t in self.sets.items() if not need.isdisjoint(e)) - \
            sum(self.parts.get(e, 0.0) for e in need)


def subset_cost(costs: dict, subset: Sequence[str], sources: dict | None = None,
                shared: SharedPrefill | None = None) -> float:
    """Cost per pair of running `subset`: its experts' costs plus, once each, those of the experts
    they are computed from (`sources`). A native or derived expert records 0 when its source runs
    in the same bank, so alone it would look free. shared (`shared_costs`): each expert's cell carries
    its equal part of the prompt nodes it shares with others, but a subset running any of them prefills
    all of such a node, so that is added (SharedPrefill.extra)."""
    need = set(subset) | {sources[e] for e in subset if sources and e in sources}
    return float(sum(costs[e] for e in sorted(need))) + (float(shared.extra(need)) if shared else 0.0)


def shared_costs(records: Sequence) -> SharedPrefill | None:
    """The records' `meta.prefill_shared` and cells' "shared" parts, per pair on average; None where no
    record has them (imported banks, a naive run: costs that add up)."""
    sets: dict = {}
    parts: dict = {}
    for r in records:
        for t, experts in r.meta.get("prefill_shared") or ():
            key = tuple(sorted(experts))
            sets[key] = sets.get(key, 0.0) + float(t)
        for e, c in (r.meta.get("expert_cost") or {}).items():
            if isinstance(c, dict) and c.get("shared"):
                parts[e] = parts.get(e, 0.0) + float(c["shared"])
    if not sets or not records:
        return None
    n = len(records)
    return SharedPrefill({k: v / n for k, v in sorted(sets.items())}, {k: v / n for k, v in sorted(parts.items())})


def mean_cost(records: Sequence, expert: str, model: CostModel = CostModel()) -> float | None:
    """The expert's mean recorded cost per pair over the records that record one, else None."""
    vals = [c for c in (record_cost(r, expert, model) for r in records) if c is not None]
    return float(np.mean(vals)) if vals else None


def expert_costs(records: Sequence, experts: Sequence[str], override: dict | None = None,
                 model: CostModel = CostModel()) -> tuple[dict, str]:
    """-> ({expert: mean cost per pair}, source): override > meta.expert_cost > one unit each."""
    override = override or {}
    measured = {e: c for e in experts if (c := mean_cost(records, e, model)) is not None}
    if not measured and not override:
        return {e: model.default_unit for e in experts}, "unit"
    out = {}
    for e in experts:
        if e in override:
            out[e] = override[e]
        elif e in measured:
            out[e] = measured[e]
        else:
            raise InputError(f"expert {e!r} has no cost: the signals record none for it and --costs "
                             "does not name it", field=f"meta.expert_cost.{e}")
    if not any(out.values()):
        raise InputError("every expert's recorded cost is 0 tokens, so any subset fits any budget; pass "
                         "--costs FILE (expert -> tokens per pair), or drop meta.expert_cost to count experts",
                         field="meta.expert_cost")
    source = "+".join(name for name, used in (("file", override), ("measured", measured)) if used)
    return out, source
