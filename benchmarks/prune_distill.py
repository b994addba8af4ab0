"""Does distilling the full stack into the pruned one close the pruning gap? A study for #24.

    python benchmarks/prune_distill.py [--splits 5] [--first 0] [--budget 0.3333] [--only SUBSTR]

The paper names distillation as a way to cut BAER's cost. Here the student is the stack (Eq. 6) on
the subset the budget search picks (selection/budget.py, what `fit --budget` prunes to), and the
teacher is the full bank's stack. On every cell of `cost_accuracy.py` (public LLMBar and JudgeBench
banks, `SplitSpec(seed="cost-<i>")`) the same subset is fitted four ways, all odd logistic models on
the subset's phi / rms (antisymmetric by construction), lambda by 5-fold CV accuracy on the labels:

  label:  the plain stack on the non-test labels (what `fit --budget` deploys with --head stack);
  mix:    soft targets (1[y = a] + sigma(s_T)) / 2 on the non-test rows, s_T the teacher's
          OUT-OF-FOLD score (5 id-hashed folds), so the teacher never scores a row it was fitted on;
  soft:   sigma(s_T) alone (pure distillation: labels enter only through the teacher);
  trans:  the non-test rows with their labels plus the TEST rows with the teacher's soft targets
          sigma(s_T(test)), the teacher fitted on all non-test rows. No test label is read, but the
          test rows' full-bank signals are: this is the deployment where a pool of unlabelled pairs
          was run once through the whole bank. Reported apart for that reason.

Each is scored on the test rows (s = 0 at half credit, as cost_accuracy.py scores) against the full
stack. Table to stderr, ONE JSON line to stdout. A study tool: never asserts, not in the tests.
"""
from __future__ import annotations

import json
import os
import sys

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cost_accuracy import (accuracy, data_root, gap_figures, iter_cells, no_cells, study_arguments,  # noqa: E402
                           test_rows, ups_downs)

MODES = ("label", "mix", "soft", "trans")


def sigmoid(s: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * s))


def soft_logistic(x: np.ndarray, t: np.ndarray, lam: float) -> np.ndarray:
    """argmin_w mean_i [t_i log(1 + e^-m_i) + (1 - t_i) log(1 + e^m_i)] + lam/2 |w|^2, m = x w; t in [0, 1].

    With t in {0, 1} this is the stack's own objective (heads.stack.fit_odd_logistic). Newton's method."""
    w = np.zeros(x.shape[1])
    n = len(x)
    for _ in range(100):
        p = sigmoid(x @ w)
        g = x.T @ (p - t) / n + lam * w
        if np.max(np.abs(g)) < 1e-10:
            break
        h = (x.T * (p * (1 - p))) @ x / n + lam * np.eye(x.shape[1])
        w -= np.linalg.solve(h, g)
    return w


def fit_soft(phi: np.ndarray, t: np.ndarray, y: np.ndarray, folds: np.ndarray, lambdas) -> tuple:
    """lambda by CV accuracy against the LABELS y of the labelled rows (the first len(y) rows of phi),
    ties to the larger lambda; -> (rms, w) refitted on all rows."""
    from baer_fast.heads.stack import training_rms
    n = len(y)
    best = None
    for lam in sorted(lambdas, reverse=True):
        s = np.zeros(n)
        for f in np.unique(folds):
            tr = np.concatenate([folds != f, np.ones(len(phi) - n, bool)])
            rms = training_rms(phi[tr])
            s[folds == f] = (phi[:n][folds == f] / rms) @ soft_logistic(phi[tr] / rms, t[tr], lam)
        acc = float(np.mean(np.where(s >= 0, 1.0, -1.0) == y))
        if best is None or acc > best[0] + 1e-12:
            best = (acc, lam)
    rms = training_rms(phi)
    return rms, soft_logistic(phi / rms, t, best[1])


def cell(records, spec, budget: float) -> dict:
    from baer_fast.errors import InputError
    from baer_fast.heads.stack import LAMBDAS, StackHead
    from baer_fast.selection.budget import (CostModel, expert_costs, fit_scores, fit_stack, labelled_rows,
                                            plan_budget)
    from baer_fast.selection.nested import fold_assignments
    test = test_rows(records, spec)
    everyone = sorted({k for r in records for k in r.experts})
    costs, _ = expert_costs(test, everyone)
    rows, roles, y = labelled_rows(records, spec)
    cats = sorted({r.subset for r in rows})
    teacher, _ = fit_stack(rows, y, roles, experts=everyone, categories=cats)
    out = {"full": accuracy(teacher.score(test), test)}
    try:
        plan = plan_budget(records, f"{min(budget, 1.0):.12f}", spec=spec, model=CostModel(outer_repeats=0))
    except InputError as e:              # nothing fits the budget: counted, not hidden
        return {**out, "infeasible": str(e)}
    sub = sorted(plan["experts"])
    out["experts"], out["cost"] = sub, sum(costs[e] for e in sub) / sum(costs.values())
    ids = [r.id for r in rows]
    phi_t = teacher.features(rows)
    s_oof, teach = np.zeros(len(rows)), fold_assignments(ids, 5, 1, "baer-distill")[0]
    for f in range(5):
        s_oof[teach == f] = fit_scores(phi_t, y, ids, np.flatnonzero(teach != f), np.flatnonzero(teach == f))
    probe = StackHead(sub, cats, np.ones(1), np.zeros(1), 0.0)
    phi_s, phi_test = probe.features(rows), probe.features(test)
    hard = (y > 0).astype(float)
    folds = fold_assignments(ids, 5, 1, "baer-budget:lambda")[0]
    targets = {"label": (phi_s, hard), "mix": (phi_s, (hard + sigmoid(s_oof)) / 2), "soft": (phi_s, sigmoid(s_oof)),
               "trans": (np.concatenate([phi_s, phi_test]),
                         np.concatenate([hard, sigmoid(teacher.score(test))]))}
    for mode, (x, t) in targets.items():
        rms, w = fit_soft(x, t, y, folds, LAMBDAS)
        out[mode] = accuracy((phi_test / rms) @ w, test)
    return out


def summary(cells: list[dict], mode: str) -> dict:
    return gap_figures([100 * (c[mode] - c["full"]) for c in cells if mode in c])


def main(argv=None) -> int:
    args = study_arguments(__doc__.splitlines()[0]).parse_args(argv)
    import logging
    logging.getLogger("baer_fast").setLevel(logging.ERROR)
    root, cells = data_root(args.data), []
    for name, records, spec, i in iter_cells(root, args.only, args.first, args.splits):
        c = {"condition": name, "split": i, **cell(records, spec, args.budget)}
        cells.append(c)
        parts = "infeasible" if "infeasible" in c else " ".join(f"{m}={100 * c[m]:.1f}" for m in MODES)
        print(f"{name:<30} {spec.seed} full={100 * c['full']:.1f} {parts}", file=sys.stderr, flush=True)
    if not cells:
        raise no_cells(root, args.only)
    out = {m: summary(cells, m) for m in MODES}
    for m in MODES[1:]:
        pairs = [(c[m], c["label"]) for c in cells if m in c]
        out[m]["cells_up_vs_label"], out[m]["cells_down_vs_label"] = ups_downs(pairs)
    print(json.dumps({"benchmark": "prune_distill", "budget": args.budget, "splits": args.splits,
                      "first_split": args.first, "summary": out}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
