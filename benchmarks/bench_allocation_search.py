"""Per-subset budget search (selection/allocation.py): lazy greedy steps against full ones, same bank, same run.

    python benchmarks/bench_allocation_search.py [--subsets 10] [--experts 10] [--rows 50] [--budget 0.33]
                                                 [--nested] [--only lazy|full]

A synthetic bank (seeded): in each subset, expert k is right with probability 0.55 + 0.03 k and costs
100 + 50 k tokens, with noise per pair. Times `plan_budget(..., space_for=allocation.space_for)` with the
allocation space's lazy steps and with full greedy steps (every candidate fitted at every step), counts the
distinct stack fits each makes and whether they choose the same allocation. Without --nested the search runs
once (`CostModel(outer_repeats=0)`); with it, also inside the 10 outer folds, as `fit` does. The table goes
to stderr and ONE JSON line to stdout.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np


def synthetic_bank(subsets: int, experts: int, rows: int, seed: int = 0) -> list:
    from baer_fast.io.records import Signals
    rng, out = np.random.default_rng(seed), []
    for g in range(subsets):
        for i in range(rows):
            label = "a" if rng.random() < 0.5 else "b"
            sign, runs, cost = (1.0 if label == "a" else -1.0), {}, {}
            for k in range(experts):
                right = rng.random() < 0.55 + 0.03 * k
                centre = 0.5 + (0.3 if right else -0.3) * sign
                runs[f"e{k:02d}"] = [float(np.clip(centre + rng.normal(0, 0.15), 0.01, 0.99)) for _ in range(2)]
                cost[f"e{k:02d}"] = {"prefilled": int((100 + 50 * k) * rng.uniform(0.8, 1.2)), "decoded": 10}
            out.append(Signals(f"s{g:02d}-{i:04d}", runs, f"s{g:02d}", label, meta={"expert_cost": cost}))
    return out


def timed(records, budget: str, lazy: bool, nested: bool) -> dict:
    from baer_fast.selection import allocation
    from baer_fast.selection.budget import CostModel, SubsetCV, plan_budget

    class Space(allocation.AllocationSpace):
        pass
    Space.lazy = lazy
    fits, real = set(), SubsetCV.scores

    def counting(self, key):
        fits.add((id(self), tuple(sorted(key))))
        return real(self, key)
    SubsetCV.scores = counting
    try:
        t = time.perf_counter()
        plan = plan_budget(records, budget, model=CostModel(outer_repeats=2 if nested else 0),
                           space_for=lambda *a: Space(*a))
        seconds = time.perf_counter() - t
    finally:
        SubsetCV.scores = real
    return {"seconds": seconds, "fits": len(fits), "moves": plan["moves"], "cv_accuracy": plan["cv_accuracy"]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--subsets", type=int, default=10)
    ap.add_argument("--experts", type=int, default=10)
    ap.add_argument("--rows", type=int, default=50, help="rows per subset")
    ap.add_argument("--budget", default="0.33")
    ap.add_argument("--nested", action="store_true", help="include the nested check (10 more searches)")
    ap.add_argument("--only", choices=("lazy", "full"), default=None)
    args = ap.parse_args(argv)
    records = synthetic_bank(args.subsets, args.experts, args.rows)
    runs = {name: timed(records, args.budget, name == "lazy", args.nested)
            for name in ("lazy", "full") if args.only in (None, name)}
    for name, r in runs.items():
        print(f"{name:<5} {r['seconds']:8.1f} s  {r['fits']:6d} stack fits  CV accuracy {100 * r['cv_accuracy']:.1f}  "
              f"{len(r['moves'])} moves", file=sys.stderr)
    same = runs["lazy"]["moves"] == runs["full"]["moves"] if len(runs) == 2 else None
    print(json.dumps({"benchmark": "allocation_search", "subsets": args.subsets, "experts": args.experts,
                      "rows_per_subset": args.rows, "budget": args.budget, "nested": args.nested,
                      "same_allocation": same,
                      **{f"{k}_{f}": r[f] for k, r in runs.items() for f in ("seconds", "fits", "cv_accuracy")}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
