"""Early exit: fit the two-stage head (cheap stack, tau) and run its stages over pairs.

Stage 1 is the subset the budget search (selection/budget.py) picks at `cheap_budget`;
stage 2 is the deployed full head. tau is chosen on non-test rows from out-of-fold scores
(the same repeated id-hashed folds as the search; the full stage stood in by the full stack):
the smallest tau whose cascade CV accuracy stays >= the full stack's CV accuracy minus
`tolerance` (points / 100), i.e. the most exits within the tolerance. tau = inf never exits.
The artifact keeps the full head as deployed and adds `cascade` = {stage1 (stack JSON),
stage1_experts, tau, tolerance, cv figures, costs}; `artifact.deployed_head` wraps them.
"""
from __future__ import annotations

import logging
import math
from dataclasses import replace
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from baer_fast.heads.cascade import ROUND_DIGITS, CascadeHead
from baer_fast.heads.stack import StackHead
from baer_fast.selection.budget import (CostModel, expert_costs, fit_stack, labelled_rows, parse_budget,
                                       plan_budget, restrict, subset_cv_for)
from baer_fast.io.splits import SplitSpec

log = logging.getLogger("baer_fast")


@dataclass(frozen=True)
class CascadeSpec:
    cheap_budget: str = "0.33"     # stage 1's budget (fraction of the full bank's cost, or tokens=N)
    tolerance: float = 0.0         # CV accuracy the cascade may lose against the full stack (0: none, which
                                   # leaves room for the optimism of choosing stage 1 on the same folds)


def choose_tau(s1: list, s2: list, y: np.ndarray, tolerance: float) -> dict:
    """s1, s2: per fold assignment, [N] out-of-fold scores of stage 1 / the full stack."""
    a1 = [np.where(s >= 0, 1.0, -1.0) == y for s in s1]
    a2 = [np.where(s >= 0, 1.0, -1.0) == y for s in s2]
    conf = [np.round(np.abs(s), ROUND_DIGITS) for s in s1]
    full = float(np.mean([a.mean() for a in a2]))
    best = {"tau": math.inf, "cv_accuracy": full, "cv_exit_rate": 0.0}
    for tau in sorted({float(t) for c in conf for t in c}, reverse=True):
        ex = [c >= tau for c in conf]
        acc = float(np.mean([np.where(e, x1, x2).mean() for e, x1, x2 in zip(ex, a1, a2)]))
        if acc >= full - tolerance - 1e-12:
            best = {"tau": tau, "cv_accuracy": acc, "cv_exit_rate": float(np.mean([e.mean() for e in ex]))}
    return {**best, "full_cv_accuracy": full, "stage1_cv_accuracy": float(np.mean([a.mean() for a in a1]))}


def fit_cascade(records: Sequence, full_art: dict, *, spec: SplitSpec = SplitSpec(),
                cascade: CascadeSpec = CascadeSpec(), costs_override=None, model: CostModel = CostModel()) -> dict:
    """-> full_art with `cascade` added (stage 1 fitted on the non-test rows of `records`)."""
    experts = list(full_art["experts"])
    mine = restrict(records, experts)
    kind, value = parse_budget(cascade.cheap_budget)
    if kind == "fraction":      # a share of the whole bank's cost, even when the full stage is pruned
        rows, _, _ = labelled_rows(records, spec)
        bank, _ = expert_costs(rows, sorted({k for r in rows for k in r.experts}), costs_override, model)
        value = value * sum(bank.values())
    plan = plan_budget(mine, f"tokens={value!r}", spec=spec, costs_override=costs_override, model=model)
    stage1 = plan["experts"]
    rows, roles, y = labelled_rows(mine, spec)
    cats = sorted({r.subset for r in rows})
    head1, info1 = fit_stack(rows, y, roles, experts=stage1, categories=cats)
    cv, _ = subset_cv_for(mine, spec, experts, model=model)
    s1 = [cv.oof_scores(stage1, f, head1.lam) for f in cv.folds]
    s2 = [cv.oof_scores(experts, f) for f in cv.folds]
    tau = choose_tau(s1, s2, y, cascade.tolerance)
    costs, source = expert_costs(rows, experts, costs_override, model)
    c1, c_all = sum(costs[e] for e in stage1), sum(costs.values())
    art = dict(full_art)
    art["cascade"] = {
        "stage1": head1.to_json(), "stage1_experts": stage1, "tau": tau["tau"] if math.isfinite(tau["tau"]) else 1e308,
        "tolerance": cascade.tolerance, "cheap_budget": cascade.cheap_budget, "stage1_lambda": info1["lambda"],
        "cv": tau, "cost_source": source, "stage1_cost_per_pair": c1, "full_cost_per_pair": c_all,
        "expected_cost_per_pair": c1 + (1.0 - tau["cv_exit_rate"]) * (c_all - c1),
        "rule": "exit iff round(|s1|, 9) >= tau; tau: most CV exits with cascade CV accuracy >= full stack CV "
                "accuracy - tolerance (non-test rows)"}
    return art


def merge(first, second):
    """One record from a pair's two stage runs (second stage's experts and costs added)."""
    meta = {**first.meta, **{k: v for k, v in second.meta.items() if k != "expert_cost"}}
    cost = {**(first.meta.get("expert_cost") or {}), **(second.meta.get("expert_cost") or {})}
    if cost:
        meta["expert_cost"] = cost
    return replace(first, experts={**first.experts, **second.experts}, meta=meta)


def run_staged(art: dict, pairs: Sequence, run: Callable) -> tuple[list, dict]:
    """run(pairs, experts) -> Signals per pair (the bank). Stage 1 on every pair, stage 2, batched,
    on the pairs that did not exit -> (records, report: pairs, exited, exit fraction, tokens per pair)."""
    c = art["cascade"]
    head = CascadeHead(StackHead.from_json(c["stage1"]), None, float(c["tau"]))
    first = run(list(pairs), list(c["stage1_experts"]))
    exits = head.exits(first) if first else np.zeros(0, bool)
    rest = [e for e in art["experts"] if e not in c["stage1_experts"]]
    todo = [i for i, e in enumerate(exits) if not e]
    out = list(first)
    if todo and rest:
        for i, rec in zip(todo, run([pairs[i] for i in todo], rest)):
            out[i] = merge(first[i], rec)
    report = staged_report(out, exits)
    log.info("cascade: %d of %d pairs exited after stage 1 (%.1f%%); %.1f tokens decoded, %.1f prefilled "
             "per pair", report["exited"], report["pairs"], 100 * report["exit_fraction"],
             report["tokens_decoded_per_pair"], report["tokens_prefilled_per_pair"])
    return out, report


def staged_report(records: Sequence, exits: np.ndarray) -> dict:
    n = max(len(records), 1)
    cost = [c for r in records for c in (r.meta.get("expert_cost") or {}).values()]
    return {"pairs": len(records), "exited": int(np.sum(exits)), "exit_fraction": float(np.sum(exits)) / n,
            "tokens_decoded_per_pair": sum(float(c.get("decoded", 0)) for c in cost) / n,
            "tokens_prefilled_per_pair": sum(float(c.get("prefilled", 0)) for c in cost) / n}
