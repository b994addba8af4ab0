"""Adapters from published judge outputs (pairs + one signals bank per condition) and from
preference datasets (pairs only).

Every module has `load(src, *, rejects=None, options=None) -> Imported`: a bad record is raised,
or kept in `rejects` (`--on-error skip`) and left out. Judge outputs: decisions map to u in
{1, 0, 0.5} (a better / b better / tie), unparsed -> None; both display orders are kept as runs
`[order ab, order ba]`, already mapped to the canonical frame; a rejected verdict is a missing
run (None), a rejected pair takes its verdicts with it. Dataset modules (PAIR_ADAPTERS) read
rows through `_rows`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

PAIR_ADAPTERS = ("rewardbench", "hh-rlhf", "ultrafeedback", "mtbench-human", "arena", "evalbiasbench", "table")
ADAPTERS = ("llmbar", "judgebench", "autoj", "pandalm") + PAIR_ADAPTERS


@dataclass
class Imported:
    pairs: list                                   # [Pair]
    banks: dict = field(default_factory=dict)     # condition name -> [Signals], same order as pairs
    notes: list = field(default_factory=list)     # human-readable remarks printed by `import`
    dropped: dict = field(default_factory=dict)   # reason -> records left out by design (`import` warns)


def load(kind: str, src: str, *, rejects=None, options=None) -> Imported:
    import importlib

    if kind not in ADAPTERS:
        raise KeyError(kind)
    mod = importlib.import_module(f"baer_fast.io.adapters.{kind.replace('-', '_')}")
    return mod.load(src, rejects=rejects, options=options)


def bank_signals(pairs, runs_by_expert: dict[str, list], condition: str, costs: dict | None = None) -> list:
    """Build Signals for each pair from {expert: [runs per pair]} (pair order); costs, where the
    source kept what the runs cost: {expert: [{"prefilled", "decoded"} or None per pair]} -> meta.expert_cost
    (None: nothing to estimate from, so no entry)."""
    from baer_fast.io.text_stats import pair_meta
    from baer_fast.io.records import Signals

    out = []
    for i, p in enumerate(pairs):
        experts = {name: runs[i] for name, runs in runs_by_expert.items()}
        meta = {"condition": condition, **pair_meta(p.question, p.response_a, p.response_b), **p.meta}
        kept = {name: c[i] for name, c in (costs or {}).items() if c[i] is not None}
        if kept:
            meta["expert_cost"] = kept
        out.append(Signals(p.id, experts, subset=p.subset, label=p.label, split=p.split, meta=meta,
                           category=p.category))
    return out
