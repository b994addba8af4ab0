"""Would pruning reach the full head if it could drop one display order of an expert? A study.

    python benchmarks/prune_single_order.py [--splits 5] [--first 0] [--budget 0.3333] [--only SUBSTR] [--salt S]

Every two-order expert E of a bank also gets two single-order versions, E^1 (the run whose display
order shows the pair's canonical-first response first) and E^2 (the other run). Their one run is
exactly antisymmetric under the swap: the canonical orientation is a function of the pair's content,
not of its positions (in the runtime, the responses' text order, bank/canonical.py; here a hash of the
pair's id salted with --salt, which the labels do not depend on). Each costs HALF of E's cost: an optimistic price, since
the rounds a protocol runs before its verdicts (LLMBar's metrics, reference answers) are shared by both
orders, so the figures are an upper bound on what the idea could give.

On the cells of `cost_accuracy.py` (public LLMBar and JudgeBench banks, `SplitSpec(seed="cost-<i>")`,
the same costs), the budget search (selection/budget.py, stack heads, the search's own rule) runs three
ways at the same budget, a share of the ORIGINAL bank's cost:
  base: the bank as it is (what `fit --budget` does);
  both: the bank plus the single-order versions;
  half: every two-order expert replaced by its two single-order versions.
Each pruned stack is scored on the test rows (s = 0 at half credit, as cost_accuracy.py scores) against
the full stack. Table to stderr, ONE JSON line to stdout. A study tool: never asserts, not in the tests.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sys

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cost_accuracy import (accuracy, data_root, gap_figures, iter_cells, no_cells, stack_art,  # noqa: E402
                           study_arguments, test_rows, ups_downs)

MODES = ("base", "both", "half")


def canonical_first(record_id: str, salt: str) -> int:
    """0: the pair's run 0 (order ab) shows its canonical-first response first; 1: run 1 does."""
    return hashlib.sha256(f"{salt}:{record_id}".encode()).digest()[0] & 1


def with_single_orders(rec, keep_whole: bool, salt: str):
    """The record with E^1 / E^2 added for every two-order expert E (E kept iff keep_whole)."""
    experts, cost = {}, dict(rec.meta.get("expert_cost") or {})
    first = canonical_first(rec.id, salt)
    for name, runs in rec.experts.items():
        if len(runs) != 2:
            experts[name] = runs
            continue
        if keep_whole:
            experts[name] = runs
        experts[name + "^1"], experts[name + "^2"] = [runs[first]], [runs[1 - first]]
        c = cost.get(name)
        if isinstance(c, dict):
            half = {"prefilled": float(c.get("prefilled", 0)) / 2, "decoded": float(c.get("decoded", 0)) / 2}
            cost[name + "^1"] = cost[name + "^2"] = half
    meta = {**rec.meta, "expert_cost": cost} if cost else rec.meta
    return dataclasses.replace(rec, experts=experts, meta=meta)


def pruned(records, spec, budget: float, full_cost: float) -> dict:
    """The budget search on `records` at `budget` x full_cost per pair; its stack scored on test."""
    from baer_fast.artifact import deployed_head
    from baer_fast.selection.budget import CostModel, expert_costs, plan_budget
    test = test_rows(records, spec)
    costs, _ = expert_costs(test, sorted({k for r in records for k in r.experts}))
    share = budget * full_cost / sum(costs.values())
    plan = plan_budget(records, f"{min(share, 1.0):.12f}", spec=spec, model=CostModel(outer_repeats=0))
    art = stack_art(records, spec, plan["experts"], "pruned")
    return {"test": accuracy(deployed_head(art).score(test), test),
            "cost": sum(costs[e] for e in plan["experts"]) / full_cost, "experts": plan["experts"]}


def cell(records, spec, budget: float, salt: str) -> dict:
    from baer_fast.artifact import deployed_head
    from baer_fast.errors import InputError
    from baer_fast.selection.budget import expert_costs
    test = test_rows(records, spec)
    everyone = sorted({k for r in records for k in r.experts})
    costs, _ = expert_costs(test, everyone)
    full = accuracy(deployed_head(stack_art(records, spec, everyone, "full")).score(test), test)
    out = {"full": full}
    for mode in MODES:
        bank = records if mode == "base" else [with_single_orders(r, mode == "both", salt) for r in records]
        try:
            out[mode] = pruned(bank, spec, budget, sum(costs.values()))
        except InputError as e:          # nothing fits the budget: counted, not hidden
            out[mode] = {"infeasible": str(e)}
    return out


def summary(cells: list[dict], mode: str) -> dict:
    """Over the cells where base is feasible (the ones cost_accuracy.py counts)."""
    return gap_figures([100 * (c[mode]["test"] - c["full"]) for c in cells
                        if "test" in c["base"] and "test" in c[mode]])


def main(argv=None) -> int:
    ap = study_arguments(__doc__.splitlines()[0])
    ap.add_argument("--salt", default="canonical", help="hash salt of each pair's canonical orientation; "
                    "another value draws another orientation per pair")
    args = ap.parse_args(argv)
    import logging
    logging.getLogger("baer_fast").setLevel(logging.ERROR)
    root, cells = data_root(args.data), []
    for name, records, spec, i in iter_cells(root, args.only, args.first, args.splits):
        c = {"condition": name, "split": i, **cell(records, spec, args.budget, args.salt)}
        cells.append(c)
        parts = " ".join(f"{m}=" + (f"{100 * c[m]['test']:.1f}@{c[m]['cost']:.2f}" if "test" in c[m]
                                    else "infeasible") for m in MODES)
        print(f"{name:<30} {spec.seed} full={100 * c['full']:.1f} {parts}", file=sys.stderr, flush=True)
    if not cells:
        raise no_cells(root, args.only)
    out = {m: summary(cells, m) for m in MODES}
    for m in MODES[1:]:
        pairs = [(c[m]["test"], c["base"]["test"]) for c in cells if "test" in c["base"] and "test" in c[m]]
        out[m]["cells_up_vs_base"], out[m]["cells_down_vs_base"] = ups_downs(pairs)
    print(json.dumps({"benchmark": "prune_single_order", "budget": args.budget, "splits": args.splits, "salt": args.salt,
                      "first_split": args.first, "summary": out}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
