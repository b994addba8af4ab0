"""Expert pruning under a cost budget: choose the subset by cross-validated accuracy on non-test rows.

Costs per (pair, expert) come from each signals record's `meta.expert_cost` (written by
`baer-fast experts` and the LLMBar importer, see docs/cost.md), from a `--costs FILE`
override (expert -> tokens per pair), or, where neither says anything, one unit per expert.
An expert's cost is its mean over the rows fitting the head; a subset costs the sum.

Search (deterministic): greedy forward from the empty set and greedy backward from the
full bank, each step scored by the stack's (Eq. 6) out-of-fold log-loss (CostModel.criterion;
or accuracy) over repeated id-hashed fold assignments, one lambda (the full bank's, chosen on
selection/calibration). Among the visited subsets within the budget the best wins; ties go to
the other figure, then the cheaper, the smaller, the first by name. Test rows are never read.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from baer_fast.errors import InputError
from baer_fast.features.evidence import EPS, evidence, runs_tensor, stack_features
from baer_fast.heads.stack import LAMBDAS, StackHead, cv_lambda, fit_stack_weights, training_rms
from baer_fast.selection.nested import fold_assignments
from baer_fast.io.splits import SplitSpec


@dataclass(frozen=True)
class CostModel:
    decode_weight: float = 1.0     # a decoded token counts this many prefilled tokens
    default_unit: float = 1.0      # cost per pair of an expert when nothing records its cost
    repeats: int = 3               # fold assignments averaged by the subset search
    rounding: int = 9              # CV accuracies compared after rounding (ties are real ties)
    criterion: str = "logloss"     # what the search ranks first: CV "logloss" (smoother on small dev sets) or "accuracy"


def parse_budget(text: str) -> tuple[str, float]:
    """'0.33' -> ('fraction', 0.33); 'tokens=N' -> ('tokens', N)."""
    raw = str(text).strip()
    kind, _, value = raw.partition("=") if "=" in raw else ("fraction", "", raw)
    try:
        x = float(value)
    except ValueError:
        x = math.nan
    if kind not in ("fraction", "tokens") or not math.isfinite(x) or x <= 0 or (kind == "fraction" and x > 1):
        raise InputError(f"--budget {raw!r}: expected a fraction in (0, 1] of the full bank's cost "
                         "(e.g. 0.33) or tokens=N per pair", field="--budget")
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


def expert_costs(records: Sequence, experts: Sequence[str], override: dict | None = None,
                 model: CostModel = CostModel()) -> tuple[dict, str]:
    """-> ({expert: mean cost per pair}, source): override > meta.expert_cost > one unit each."""
    override = override or {}
    measured = {}
    for e in experts:
        vals = [c for c in (record_cost(r, e, model) for r in records) if c is not None]
        if vals:
            measured[e] = float(np.mean(vals))
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
    source = "+".join(name for name, used in (("file", override), ("measured", measured)) if used)
    return out, source


def newton_odd_logistic(x: np.ndarray, y: np.ndarray, lam: float, iters: int = 50) -> np.ndarray:
    """The stack's objective (heads.stack.fit_odd_logistic) by Newton's method, for the search's many
    small fits. On the sign-augmented set {(x, y), (-x, -y)} both copies give the same loss term, so
    it is mean_i log(1 + exp(-y_i w.x_i)) + lam/2 |w|^2 over the rows: strictly convex for lam > 0."""
    n, d = x.shape
    w = np.zeros(d)
    for _ in range(iters):
        m = y * (x @ w)
        sig = 0.5 * (1.0 - np.tanh(0.5 * m))                      # sigmoid(-m), overflow-free
        grad = -(x.T @ (y * sig)) / n + lam * w
        hess = (x.T * (sig * (1.0 - sig))) @ x / n + lam * np.eye(d)
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.max(np.abs(step)) < 1e-10:
            break
    return w


def restrict(records: Sequence, experts: Sequence[str]) -> list:
    keep = set(experts)
    return [replace(r, experts={k: v for k, v in r.experts.items() if k in keep}) for r in records]


class SubsetCV:
    """Out-of-fold stack accuracy of any expert subset of fixed rows (memoised by subset)."""

    def __init__(self, rows: Sequence, y: np.ndarray, experts: Sequence[str], categories: Sequence[str], *,
                 lam: float, eps: float = EPS, model: CostModel = CostModel()):
        _, _, self.z, self.zt = evidence(runs_tensor(rows, experts), eps)
        self.index = {e: k for k, e in enumerate(experts)}
        self.subsets, self.categories, self.y, self.lam = [r.subset for r in rows], list(categories), y, lam
        ids = [r.id for r in rows]
        self.folds = list(fold_assignments(ids, 5, model.repeats, "baer-budget"))
        self.rounding, self.criterion = model.rounding, model.criterion
        self._memo: dict[tuple, float] = {}

    def phi(self, subset: Sequence[str]) -> np.ndarray:
        cols = [self.index[e] for e in subset]
        return stack_features(self.z[:, cols], self.zt[:, cols], self.subsets, self.categories)

    def oof_scores(self, subset: Sequence[str], folds: np.ndarray, lam: float | None = None) -> np.ndarray:
        phi, s, lam = self.phi(subset), np.zeros(len(self.y)), self.lam if lam is None else lam
        for f in np.unique(folds):
            tr, te = folds != f, folds == f
            rms = training_rms(phi[tr])
            w = newton_odd_logistic(phi[tr] / rms, self.y[tr], lam)
            s[te] = (phi[te] / rms) @ w
        return s

    def figures(self, subset: Sequence[str]) -> tuple[float, float]:
        """(CV accuracy, CV log-loss), each averaged over the fold assignments and rounded."""
        key = tuple(sorted(subset))
        if key not in self._memo:
            scores = [self.oof_scores(key, f) for f in self.folds]
            acc = np.mean([np.mean(np.where(s >= 0, 1.0, -1.0) == self.y) for s in scores])
            loss = np.mean([np.mean(np.logaddexp(0.0, -self.y * s)) for s in scores])
            self._memo[key] = (round(float(acc), self.rounding), round(float(loss), self.rounding))
        return self._memo[key]

    def accuracy(self, subset: Sequence[str]) -> float:
        return self.figures(subset)[0]

    def rank(self, subset: Sequence[str]) -> tuple[float, float]:
        """Higher is better: CV accuracy, then lower CV log-loss (or the other way round)."""
        acc, loss = self.figures(subset)
        return (acc, -loss) if self.criterion == "accuracy" else (-loss, acc)


def _visit(cv: SubsetCV, costs: dict, subset, how: str, seen: dict) -> None:
    key = tuple(sorted(subset))
    if key not in seen:
        acc, loss = cv.figures(key)
        seen[key] = {"experts": list(key), "cost": float(sum(costs[e] for e in key)),
                     "cv_accuracy": acc, "cv_logloss": loss, "found_by": how}


def search(cv: SubsetCV, costs: dict, limit: float) -> list[dict]:
    """Every subset the greedy forward (within `limit`) and backward passes visit, in visiting order."""
    experts, seen = sorted(costs), {}
    chosen: list[str] = []
    while True:
        cands = [e for e in experts if e not in chosen and sum(costs[x] for x in chosen) + costs[e] <= limit]
        if not cands:
            break
        best = max(cands, key=lambda e: (cv.rank(chosen + [e]), -costs[e], [-ord(c) for c in e]))
        chosen = chosen + [best]
        _visit(cv, costs, chosen, "forward", seen)
    current = list(experts)
    _visit(cv, costs, current, "backward", seen)
    while len(current) > 1:
        drop = max(current, key=lambda e: (cv.rank([x for x in current if x != e]), costs[e],
                                           [-ord(c) for c in e]))
        current = [x for x in current if x != drop]
        _visit(cv, costs, current, "backward", seen)
    return list(seen.values())


def choose(visited: list[dict], limit: float, criterion: str = "logloss") -> dict:
    within = [v for v in visited if v["cost"] <= limit * (1 + 1e-12)]
    if not within:
        raise InputError(f"no expert subset fits the budget of {limit:g} per pair "
                         f"(cheapest expert: {min(v['cost'] for v in visited):g})", field="--budget")
    first = (lambda v: (-v["cv_accuracy"], v["cv_logloss"])) if criterion == "accuracy" else \
        (lambda v: (v["cv_logloss"], -v["cv_accuracy"]))
    return min(within, key=lambda v: (*first(v), v["cost"], len(v["experts"]), v["experts"]))


def fit_stack(rows: Sequence, y: np.ndarray, roles, *, experts, categories, lambdas=LAMBDAS, eps: float = EPS):
    """The stack (Eq. 6) on these non-test rows, lambda by 5-fold CV (heads.stack.cv_lambda) -> (head, info)."""
    probe = StackHead(list(experts), list(categories), np.ones(1), np.zeros(1), 0.0, eps)
    phi = probe.features(rows)
    lam, _ = cv_lambda(phi, y, fold_assignments([r.id for r in rows], 5, 1, "baer-budget:lambda")[0], lambdas)
    rms, w = fit_stack_weights(phi, y, lam)
    return StackHead(list(experts), list(categories), rms, w, lam, eps), {"lambda": lam}


def labelled_rows(records: Sequence, spec: SplitSpec):
    from baer_fast.selection.fit import _check_rows, training_rows
    rows, roles = training_rows(records, spec)
    _check_rows(roles)
    y = np.array([1.0 if r.label == "a" else -1.0 for r in rows])
    return rows, roles, y


def subset_cv_for(records: Sequence, spec: SplitSpec, experts: Sequence[str], eps: float = EPS,
                  model: CostModel = CostModel()):
    """-> (SubsetCV over the non-test labelled rows, those rows): lambda from the full bank's stack."""
    rows, roles, y = labelled_rows(records, spec)
    categories = sorted({r.subset for r in rows})
    _, info = fit_stack(rows, y, roles, experts=list(experts), categories=categories, lambdas=LAMBDAS, eps=eps)
    return SubsetCV(rows, y, experts, categories, lam=info["lambda"], eps=eps, model=model), rows


def plan_budget(records: Sequence, budget: str, *, spec: SplitSpec = SplitSpec(), costs_override=None,
                model: CostModel = CostModel(), eps: float = EPS) -> dict:
    """-> the budget record: chosen subset, its cost, the full bank's, every visited subset."""
    kind, value = parse_budget(budget)
    cv, rows = subset_cv_for(records, spec, sorted({k for r in records for k in r.experts}), eps, model)
    experts = sorted(cv.index)
    costs, source = expert_costs(rows, experts, costs_override, model)
    full = float(sum(costs.values()))
    limit = value * full if kind == "fraction" else value
    visited = search(cv, costs, limit)
    best = choose(visited, limit, model.criterion)
    full_cv = cv.accuracy(experts)
    return {"budget": str(budget), "limit_per_pair": limit, "cost_source": source,
            "expert_costs": costs, "full_cost_per_pair": full, "full_cv_accuracy": full_cv,
            "experts": best["experts"], "cost_per_pair": best["cost"],
            "fraction_of_full": best["cost"] / full if full > 0 else 0.0,
            "cv_accuracy": best["cv_accuracy"], "visited": visited,
            "rule": f"greedy forward + backward over expert subsets, stack out-of-fold {model.criterion} "
                    f"({model.repeats} id-hashed 5-fold assignments, non-test rows); best within budget, "
                    "ties to the other CV figure, then the cheaper"}


def fit_budget(records: Sequence, budget: str, *, condition: str, spec: SplitSpec = SplitSpec(),
               costs_override=None, model: CostModel = CostModel(), **fit_kw) -> dict:
    """Artifact fitted on the chosen subset only, with the budget record under `budget`."""
    from baer_fast.selection.fit import fit_condition
    plan = plan_budget(records, budget, spec=spec, costs_override=costs_override, model=model)
    keep = set(plan["experts"])
    for opt in ("reference_expert", "pointwise_expert"):
        if fit_kw.get(opt) is not None and fit_kw[opt] not in keep:
            fit_kw[opt] = None
    art = fit_condition(restrict(records, plan["experts"]), condition=condition, spec=spec, **fit_kw)
    art["budget"] = plan
    return art
