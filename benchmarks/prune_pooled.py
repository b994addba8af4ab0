"""Screen: the pruned subset chosen by CV log-loss pooled over a benchmark's backbones (#24, not adopted).

    python benchmarks/prune_pooled.py [--splits 5] [--first 0] [--budget 0.3333] [--only SUBSTR]

On LLMBar Natural the pruned stack loses to the full one although some subset within a third of the
cost matches it on test in nearly every cell (`prune_ceiling.py`): the choice on ~54 non-test rows is
noisy. LLMBar's backbones judged the same pairs with (mostly) the same protocols, so this screen ranks
each subset by the CV log-loss of its stack summed over every backbone of the benchmark that ran all
its experts (each on its own non-test rows, at its own lambda, weighted by its row count), with the
product's search, near-full preference and choice otherwise unchanged (`selection.budget.search`,
`choose`), then fits the stack on the target backbone's own rows. `own` is the product's plain search
(what `cost_accuracy.py --parts pruned` deploys with stack heads). Cells of `cost_accuracy.py`
(`SplitSpec(seed="cost-<i>")`); test accuracy minus the full stack's. Table to stderr, ONE JSON line.
"""
from __future__ import annotations

import json
import os
import sys

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cost_accuracy import (accuracy, bank_sources, data_root, gap_figures, no_cells, stack_art,  # noqa: E402
                           study_arguments, test_rows, ups_downs)


class PooledCV:
    """The target's SubsetCV (its gap to the full stack), ranked by figures pooled over the backbones."""

    def __init__(self, target, members: list):
        self.target, self.members = target, members       # members: (SubsetCV, its experts), the target's included

    def figures(self, subset) -> tuple[float, float]:
        got = [(len(cv.y), cv.figures(subset)) for cv, ex in self.members if set(subset) <= ex]
        n = sum(w for w, _ in got)
        return (round(sum(w * f[0] for w, f in got) / n, self.target.rounding),
                round(sum(w * f[1] for w, f in got) / n, self.target.rounding))

    def rank(self, subset) -> tuple[float, float]:
        acc, loss = self.figures(subset)
        return (-loss, acc)

    def gap(self, subset) -> dict:
        return self.target.gap(subset)


def split_cells(bench: str, banks: dict, i: int, budget: float) -> list[dict]:
    from baer_fast.artifact import deployed_head
    from baer_fast.errors import InputError
    from baer_fast.io.splits import SplitSpec
    from baer_fast.selection.budget import ExpertSpace, choose, expert_costs, labelled_rows, search, subset_cv_for
    spec, out = SplitSpec(seed=f"cost-{i}"), []
    members = {b: subset_cv_for(recs, spec, sorted({k for r in recs for k in r.experts}))[0] for b, recs in banks.items()}
    for b in sorted(banks):
        recs, cv = banks[b], members[b]
        test = test_rows(recs, spec)
        costs, _ = expert_costs(labelled_rows(recs, spec)[0], sorted(cv.index))
        space, limit = ExpertSpace(costs), budget * sum(costs.values())
        full = accuracy(deployed_head(stack_art(recs, spec, sorted(cv.index), b)).score(test), test)
        cell = {"condition": f"{bench}/{b}", "split": i, "n_test": len(test), "full": full}
        for name, how in (("own", cv), ("pooled", PooledCV(cv, [(m, set(m.index)) for m in members.values()]))):
            try:
                pick = choose(search(how, space, limit), limit)["experts"]
            except InputError:          # no expert that cheap
                continue
            cell[name] = {"test": accuracy(deployed_head(stack_art(recs, spec, pick, b)).score(test), test),
                          "experts": pick}
        out.append(cell)
    return out


def main(argv=None) -> int:
    from baer_fast.io.adapters import load
    args = study_arguments(__doc__.splitlines()[0]).parse_args(argv)
    root, cells = data_root(args.data), []
    for bench, kind, folder in bank_sources(root, args.only):
        banks = load(kind, str(root / folder)).banks
        if len(banks) < 2:
            continue
        for i in range(args.first, args.first + args.splits):
            for c in split_cells(bench, banks, i, args.budget):
                cells.append(c)
                print(f"{c['condition']:<30} cost-{i} full={100 * c['full']:.1f} " + " ".join(
                    f"{k}={100 * c[k]['test']:.1f}" for k in ("own", "pooled") if k in c), file=sys.stderr)
    both = [c for c in cells if "own" in c and "pooled" in c]
    if not both:
        raise no_cells(root, args.only, "benchmark with two or more backbones and an affordable subset")
    summary = {k: gap_figures([100 * (c[k]["test"] - c["full"]) for c in both]) for k in ("own", "pooled")}
    summary["pooled_higher"], summary["pooled_lower"] = ups_downs([(c["pooled"]["test"], c["own"]["test"]) for c in both])
    for k in ("own", "pooled"):
        f = summary[k]
        print(f"{k:<7} cells {f['cells']:>3}  mean {f['mean_gap_points']:+.2f}  worst {f['worst_gap_points']:+.1f}  "
              f"below -3: {f['cells_below_minus_3']}", file=sys.stderr)
    print(f"pooled higher in {summary['pooled_higher']} cells, lower in {summary['pooled_lower']}", file=sys.stderr)
    print(json.dumps({"benchmark": "prune_pooled", "budget": args.budget, "splits": args.splits,
                      "first_split": args.first, "summary": summary, "cells": cells}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
