"""How close to the full stack can ANY expert subset within a budget get? A ceiling for pruning.

    python benchmarks/prune_ceiling.py [--splits 5] [--first 0] [--budget 0.3333] [--only SUBSTR] [--max-subsets 5000]

On the cells of `cost_accuracy.py` (the public LLMBar and JudgeBench banks, `SplitSpec(seed="cost-<i>")`,
the same per-expert costs), every expert subset whose cost fits the budget gets a stack (Eq. 6) fitted on
the non-test rows at every lambda of the stack's grid, and is scored on the TEST rows (s = 0 at half
credit, as `cost_accuracy.py` scores). The best (subset, lambda) *on test* is kept. No rule that sees only
the non-test rows can beat it with a stack head, so where this ceiling is more than 3 points below the full
stack (lambda by CV, as `cost_accuracy.py`'s `full`), the pruning target "never more than 3 points below"
is out of reach of any subset search. A cell with more than --max-subsets affordable subsets is searched
greedily (forward on test accuracy) instead and marked `greedy`: then the figure is a lower bound of the
ceiling. Table to stderr, ONE JSON line to stdout.
"""
from __future__ import annotations

import itertools
import json
import os
import sys

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cost_accuracy import accuracy, data_root, gap_figures, iter_cells, no_cells, study_arguments, test_rows  # noqa: E402


def cell(records, spec, budget: float, max_subsets: int) -> dict:
    from baer_fast.heads.stack import LAMBDAS, lambda_path_scores
    from baer_fast.selection.budget import SubsetCV, expert_costs, fit_stack, labelled_rows, subset_cost
    test = sorted(test_rows(records, spec), key=lambda r: r.id)
    everyone = sorted({k for r in records for k in r.experts})
    costs, _ = expert_costs(test, everyone)
    limit = budget * sum(costs.values())
    rows, roles, y = labelled_rows(records, spec)
    cats = sorted({r.subset for r in rows})
    _, info = fit_stack(rows, y, roles, experts=everyone, categories=cats)
    both = rows + test
    y_all = np.array([1.0 if r.label == "a" else -1.0 for r in both])
    feats, n = SubsetCV(both, y_all, everyone, cats, lam=info["lambda"]), len(rows)

    def test_acc(subset, lams) -> float:
        """The best test accuracy (cost_accuracy's reading) of this subset's stack over the lambdas."""
        phi = feats.phi(sorted(subset))
        return max(accuracy(s, test) for s in lambda_path_scores(phi[:n], y_all[:n], phi[n:], lams))

    full = test_acc(everyone, (info["lambda"],))
    affordable = [c for k in range(1, len(everyone)) for c in itertools.combinations(everyone, k)
                  if subset_cost(costs, c) <= limit * (1 + 1e-12)]
    out = {"experts": len(everyone), "n_test": len(test), "full": full, "affordable": len(affordable)}
    if not affordable:
        return {**out, "ceiling": None}
    if len(affordable) <= max_subsets:
        acc, best = max((test_acc(c, LAMBDAS), c) for c in affordable)
        return {**out, "ceiling": acc, "subset": list(best), "search": "exhaustive"}
    chosen, best = [], (-1.0, ())
    while True:
        cands = [e for e in everyone if e not in chosen and subset_cost(costs, chosen + [e]) <= limit * (1 + 1e-12)]
        if not cands:
            break
        acc, e = max((test_acc(chosen + [e], LAMBDAS), e) for e in cands)
        chosen.append(e)
        best = max(best, (acc, tuple(chosen)))
    return {**out, "ceiling": best[0], "subset": list(best[1]), "search": "greedy"}


def main(argv=None) -> int:
    ap = study_arguments(__doc__.splitlines()[0])
    ap.add_argument("--max-subsets", type=int, default=5000)
    args = ap.parse_args(argv)
    root, cells = data_root(args.data), []
    for name, records, spec, i in iter_cells(root, args.only, args.first, args.splits):
        c = {"condition": name, "split": i, **cell(records, spec, args.budget, args.max_subsets)}
        cells.append(c)
        gap = "infeasible" if c["ceiling"] is None else \
            f"ceiling={100 * c['ceiling']:.1f} gap={100 * (c['ceiling'] - c['full']):+.1f} ({c['search']})"
        print(f"{c['condition']:<30} {spec.seed} experts={c['experts']:<2} affordable={c['affordable']:<5} "
              f"full={100 * c['full']:.1f} {gap}", file=sys.stderr, flush=True)
    if not cells:
        raise no_cells(root, args.only)
    gaps = np.array([100 * (c["ceiling"] - c["full"]) for c in cells if c["ceiling"] is not None])
    figures = gap_figures(gaps)
    summary = {"cells": figures.pop("cells"), "infeasible": sum(c["ceiling"] is None for c in cells),
               "greedy": sum(c.get("search") == "greedy" for c in cells), **figures}
    print(json.dumps({"benchmark": "prune_ceiling", "budget": args.budget, "splits": args.splits,
                      "first_split": args.first, "summary": summary}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
