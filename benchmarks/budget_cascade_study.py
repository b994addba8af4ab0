"""A cascade held to the pruning budget on AVERAGE: how close to the full stack at a third of the cost?

    python benchmarks/budget_cascade_study.py [--splits 5] [--first 0] [--budget 0.3333] [--only SUBSTR] [--jobs 2]

The pruning target of issue #24 asks for a fixed expert subset at <= 1/3 of the full bank's cost, and
`prune_ceiling.py` shows that no subset reaches it on these banks. This screen spends the same budget
per pair *on average* instead: stage 1 (the subset the budget search picks at a smaller budget b) runs on
every pair, and the rest of the bank only on the pairs stage 1 is least sure of, as many as the budget
pays for. On the cells of `cost_accuracy.py` (public LLMBar and JudgeBench banks, `SplitSpec(seed=
"cost-<i>")`, the same per-expert costs), everything is chosen on the non-test rows:

- for each b in `STAGE1` (fractions of the budget B: 0.3, 0.45, 0.6, 0.75), `plan_with_nested` gives
  stage 1 and its nested out-of-fold scores s1 (the search re-run inside each outer training fold), and
  the full stack's on the same folds (stage 2's stand-in). With c1 the stage-1 cost share on those rows,
  the pairs that must exit for an average cost of B are `need = 1 - (B - c1) / (1 - c1)`;
- tau is the largest |s1| level at which at least `need` of the out-of-fold pairs exit; the pairs exactly
  at tau exit when a uniform hash of their id falls below `share`, the fraction that makes the exits
  `need` on average (|s1| of a one- or two-protocol stage 1 takes a handful of values, so without the
  split a whole level exits and the budget goes unspent). The id is the same in both orientations of a
  pair, so the exit decision is swap-invariant; a product version would need a content key in the
  signals instead (Judge ids are positions);
- two variants: `held`, where a pair with |s1| = 0 (no stage-1 evidence) may exit when the budget needs
  it (its score is then a tie, at half credit), so the budget holds on average; and `strict`, the
  product cascade's rule that such a pair never exits, so a cell spends more than B wherever stage 1
  leaves more than 1 - need of the pairs undecided;
- per variant, b is the one whose out-of-fold cascade is most accurate (ties: the cheaper stage 1, then
  the smaller b).

Stage 1 and the full stack are then fitted on all non-test rows and the cascade is scored on test (s = 0
at half credit, as `cost_accuracy.py` scores), with its test cost share `c1 + (1 - exit)(1 - c1)`.
Reported per b and for the chosen b; `best_on_test` (b chosen on test) is a ceiling for this choice, not
a rule. Table to stderr, ONE JSON line to stdout.
"""
from __future__ import annotations

import concurrent.futures
import json
import os
import sys

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cost_accuracy import (accuracy, data_root, gap_figures, iter_cells, no_cells, stack_art,  # noqa: E402
                           study_arguments, test_rows)

STAGE1 = (0.3, 0.45, 0.6, 0.75)       # stage-1 budgets, as fractions of the average budget
SALT = "baer-cascade:exit"
VARIANTS = {"held": True, "strict": False}   # may a pair with |s1| = 0 exit (budget held) or not (product rule)


def uniform(ids) -> np.ndarray:
    """[N] in [0, 1): io.splits.hash_unit of each id (the same for a pair and its swap, which keeps the id)."""
    from baer_fast.io.splits import hash_unit
    return np.array([hash_unit(i, SALT) for i in ids])


def exit_level(conf, need: float) -> tuple[float, float]:
    """-> (tau, share): the largest level with conf >= tau on at least `need` of the entries, and the
    share of the entries AT tau that must exit for `need` exits in all (0 when need <= 0: tau = inf)."""
    conf = np.asarray(conf, dtype=np.float64).ravel()
    if need <= 0 or not len(conf):
        return float("inf"), 0.0
    levels = np.sort(conf)[::-1]
    tau = float(levels[min(int(np.ceil(need * len(conf) - 1e-9)), len(conf)) - 1])
    above, at = float(np.mean(conf > tau)), float(np.mean(conf == tau))
    return tau, min(1.0, max(0.0, (need - above) / at))


def exits(conf, ids, tau: float, share: float, zeros: bool = False) -> np.ndarray:
    """zeros=False: a pair with no stage-1 evidence (|s1| = 0) never exits, as in the product's cascade."""
    conf = np.asarray(conf, dtype=np.float64)
    ex = (conf > tau) | ((conf == tau) & (uniform(ids) < share))
    return ex if zeros else ex & (conf > 0)


def cascade_accuracy(s1, s2, ex, y) -> float:
    """Accuracy of stage 1 where `ex`, the full stack elsewhere, a score of 0 at half credit (as `accuracy`)."""
    from baer_fast.eval.metrics import head_native_credit
    return float(np.mean(head_native_credit(np.where(ex, s1, s2), y)))


def option(records, spec, b: float, budget: float, name: str, test, costs, s2) -> dict | None:
    """Stage 1 at b x budget: tau, share and the out-of-fold accuracy (non-test rows), then test."""
    from baer_fast.artifact import deployed_head
    from baer_fast.eval.metrics import label_signs
    from baer_fast.heads.cascade import strength
    from baer_fast.selection.budget import labelled_rows, plan_with_nested
    try:
        plan, nested = plan_with_nested(records, repr(b * budget), spec=spec, warn=False)
    except Exception:           # infeasible: no expert that cheap
        return None
    c1 = plan["cost_per_pair"] / plan["full_cost_per_pair"]
    if c1 >= budget:            # stage 1 alone spends the budget: no second stage to pay for
        return None
    rows, _, y = labelled_rows(records, spec)
    need = 1.0 - (budget - c1) / (1.0 - c1)
    conf = strength(nested.s_sub)
    tau, share = exit_level(conf, need)
    s1 = np.asarray(deployed_head(stack_art(records, spec, plan["experts"], name)).score(test))
    c1t = sum(costs[e] for e in plan["experts"]) / sum(costs.values())
    yt = label_signs(test)
    out = {"b": b, "stage1": plan["experts"], "c1": c1, "need": need, "tau": tau, "share": share,
           "cv_full": cascade_accuracy(nested.s_sub, nested.s_full, np.zeros(conf.shape, bool), y)}
    for variant, zeros in VARIANTS.items():
        ex = np.stack([exits(c, [r.id for r in rows], tau, share, zeros) for c in conf])
        ext = exits(strength(s1), [r.id for r in test], tau, share, zeros)
        out[variant] = {"cv": cascade_accuracy(nested.s_sub, nested.s_full, ex, y), "cv_exit": float(ex.mean()),
                        "test": cascade_accuracy(s1, s2, ext, yt), "exit": float(ext.mean()),
                        "cost": c1t + (1.0 - float(ext.mean())) * (1.0 - c1t)}
    return out


def cell(records, spec, budget: float, name: str) -> dict:
    from baer_fast.artifact import deployed_head
    from baer_fast.selection.budget import expert_costs
    test = sorted(test_rows(records, spec), key=lambda r: r.id)
    costs, _ = expert_costs(test, sorted({k for r in records for k in r.experts}))
    s2 = np.asarray(deployed_head(stack_art(records, spec, sorted(costs), name)).score(test))
    opts = [o for o in (option(records, spec, b, budget, name, test, costs, s2) for b in STAGE1) if o is not None]
    out = {"n_test": len(test), "experts": len(costs), "full": accuracy(s2, test), "options": opts}
    for variant in VARIANTS if opts else ():
        out[f"chosen_{variant}"] = max(opts, key=lambda o: (round(o[variant]["cv"], 9), -round(o["c1"], 9), -o["b"]))["b"]
    return out


def split_cells(args_tuple) -> list[dict]:
    data, only, i, budget = args_tuple
    return [{"condition": name, "split": i, **cell(records, spec, budget, name)}
            for name, records, spec, _ in iter_cells(data_root(data), only, i, 1)]


def figures(cells: list[dict], pick) -> dict:
    got = [(c, pick(c)) for c in cells]
    got = [(c, o) for c, o in got if o is not None]
    f = gap_figures([100 * (o["test"] - c["full"]) for c, o in got])
    if got:
        f["mean_cost_fraction"] = float(np.mean([o["cost"] for _, o in got]))
        f["max_cost_fraction"] = float(np.max([o["cost"] for _, o in got]))
        f["mean_exit"] = float(np.mean([o["exit"] for _, o in got]))
    return f


def by_b(c: dict, b: float, variant: str):
    return next((o[variant] for o in c["options"] if o["b"] == b), None)


def main(argv=None) -> int:
    ap = study_arguments(__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=1, help="splits run in parallel processes")
    args = ap.parse_args(argv)
    tasks = [(args.data, args.only, i, args.budget) for i in range(args.first, args.first + args.splits)]
    with concurrent.futures.ProcessPoolExecutor(max_workers=max(args.jobs, 1)) as pool:
        cells = [c for part in pool.map(split_cells, tasks) for c in part]
    if not cells:
        raise no_cells(data_root(args.data), args.only)
    for c in cells:
        opts = " ".join(f"{o['b']:g}:" + "/".join(f"{100 * o[v]['test']:.1f}@{o[v]['cost']:.2f}" for v in VARIANTS)
                        + ("*" if o["b"] == c.get("chosen_held") else "") for o in c["options"]) or "infeasible"
        print(f"{c['condition']:<48} cost-{c['split']} full={100 * c['full']:.1f} {opts}", file=sys.stderr)
    summary = {"infeasible": sum(not c["options"] for c in cells)}
    for v in VARIANTS:
        summary[v] = {"chosen": figures(cells, lambda c, v=v: by_b(c, c[f"chosen_{v}"], v) if c["options"] else None),
                      "best_on_test": figures(cells, lambda c, v=v: max((o[v] for o in c["options"]),
                                                                         key=lambda o: o["test"], default=None)),
                      **{f"stage1_{b:g}": figures(cells, lambda c, b=b, v=v: by_b(c, b, v)) for b in STAGE1}}
        for k, f in summary[v].items():
            if f.get("cells"):
                print(f"{v:<6} {k:<13} cells {f['cells']:>3}  mean {f['mean_gap_points']:+.2f}  worst "
                      f"{f['worst_gap_points']:+.1f}  below -3: {f['cells_below_minus_3']:>2}  cost "
                      f"{f['mean_cost_fraction']:.2f} (max {f['max_cost_fraction']:.2f})  exit {f['mean_exit']:.2f}",
                      file=sys.stderr)
    print(json.dumps({"benchmark": "budget_cascade", "budget": args.budget, "splits": args.splits,
                      "first_split": args.first, "stage1": STAGE1, "summary": summary, "cells": cells}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
