"""Expert pruning under a cost budget: choose the subset by cross-validated accuracy on non-test rows.

Costs: selection/costs.py. The search runs over a space of units:
experts (`ExpertSpace`) or, per pair subset, (subset, expert) moves (selection/allocation.py).

Search (deterministic): greedy forward and backward passes, each step scored by the stack's (Eq. 6)
out-of-fold log-loss (or accuracy) over repeated id-hashed folds at the full bank's lambda. Among the
visited subsets within the budget, those whose paired CV accuracy gap to the full stack is within
noise (gap + z SE >= -tolerance; SE = sqrt(wins + losses) / N, McNemar) are preferred; the best of
them by the criterion wins. The search itself is then cross-validated (nested: chosen inside each
outer training fold, scored on the held-out fold) and the honest gap recorded. Test rows are never read.
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from baer_fast.errors import InputError
from baer_fast.progress import PROGRESS_EVERY_S, progress
from baer_fast.selection.costs import (CostModel, expert_costs, expert_sources, parse_budget, shared_costs,
                                      subset_cost)
from baer_fast.features.evidence import EPS, evidence, runs_tensor, stack_features
from baer_fast.heads.stack import LAMBDAS, StackHead, cv_lambda, fit_stack_weights, training_rms
from baer_fast.selection.nested import fold_assignments, one_blas_thread
from baer_fast.io.splits import SplitSpec, split_key

log = logging.getLogger("baer_fast")


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


def batched_oof(phi: np.ndarray, y: np.ndarray, folds: np.ndarray, lam: float, iters: int = 50) -> np.ndarray:
    """[R, N] out-of-fold scores of the stack at one lambda over folds [R, N]: every (repeat, fold) fit of
    `newton_odd_logistic` (training RMS scaling included) solved as one batch of Newton steps."""
    n_f = int(folds.max()) + 1
    train = np.concatenate([(folds != f) for f in range(n_f)]).astype(np.float64)        # [P, N], P = F * R
    n_tr = np.maximum(train.sum(axis=1), 1.0)
    rms = np.sqrt(train @ phi ** 2 / n_tr[:, None])
    x = phi[None, :, :] / np.where(rms > 0, rms, 1.0)[:, None, :]                          # [P, N, D]
    w, eye, buf = np.zeros((x.shape[0], x.shape[2])), lam * np.eye(x.shape[2]), np.empty_like(x)
    xt = x.transpose(0, 2, 1)                                                               # [P, D, N]
    for _ in range(iters):
        sig = 0.5 * (1.0 - np.tanh(0.5 * y * (x @ w[:, :, None])[:, :, 0]))                 # sigmoid(-margin)
        grad = -(xt @ (train * y * sig)[:, :, None])[:, :, 0] / n_tr[:, None] + lam * w
        # (x * c)^T: the values and strides of xt * c (BLAS sees the same call), formed contiguously in one
        # buffer; the broadcast over the transposed view, a fresh [P, N, D] each step, was half a step's time
        xc = np.multiply(x, (train * sig * (1.0 - sig))[:, :, None], out=buf).transpose(0, 2, 1)
        hess = xc @ x / n_tr[:, None, None] + eye
        step = np.linalg.solve(hess, grad[:, :, None])[:, :, 0]
        w -= step
        if np.max(np.abs(step)) < 1e-10:
            break
    s, held = (x @ w[:, :, None])[:, :, 0], 1.0 - train                                       # [P, N]
    return (s * held).reshape(n_f, folds.shape[0], -1).sum(axis=0)


def restrict(records: Sequence, experts: Sequence[str]) -> list:
    keep = set(experts)
    return [replace(r, experts={k: v for k, v in r.experts.items() if k in keep}) for r in records]


def paired_gap(s_sub: np.ndarray, s_full: np.ndarray, y: np.ndarray) -> dict:
    """Out-of-fold scores [R, N] of a head and the full stack on the same rows -> the paired accuracy gap.

    wins / losses: pairs (mean over the R repeats) only the head / only the full stack gets right. Under
    the null that each disagreement goes either way with probability 1/2 the net count has SD
    sqrt(wins + losses) (McNemar); the repeats reuse the same rows, so they are averaged, not counted.
    """
    r1 = np.where(np.atleast_2d(s_sub) >= 0, 1.0, -1.0) == y
    r2 = np.where(np.atleast_2d(s_full) >= 0, 1.0, -1.0) == y
    n, wins, losses = max(len(y), 1), float(np.mean(np.sum(r1 & ~r2, axis=1))), float(np.mean(np.sum(~r1 & r2, axis=1)))
    return {"gap": (wins - losses) / n, "se": math.sqrt(wins + losses) / n, "wins": wins, "losses": losses,
            "cv_accuracy": float(r1.mean()), "full_cv_accuracy": float(r2.mean())}


class SubsetCV:
    """Out-of-fold stack accuracy of any expert subset of fixed rows (memoised by subset)."""

    def __init__(self, rows: Sequence, y: np.ndarray, experts: Sequence[str], categories: Sequence[str], *,
                 lam: float, eps: float = EPS, model: CostModel = CostModel()):
        _, _, self.z, self.zt = evidence(runs_tensor(rows, experts), eps)
        self.index = {e: k for k, e in enumerate(experts)}
        self.full = tuple(sorted(experts))        # the whole bank's key (selection/allocation.py: every move)
        self.subsets, self.categories, self.y, self.lam = [r.subset for r in rows], list(categories), y, lam
        ids = [split_key(r) for r in rows]
        self.folds = list(fold_assignments(ids, 5, model.repeats, "baer-budget"))
        self.rounding, self.criterion = model.rounding, model.criterion
        self._memo: dict[tuple, tuple] = {}
        self._gap: dict[tuple, dict] = {}

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

    def scores(self, subset: Sequence[str]) -> np.ndarray:
        """[R, N] out-of-fold scores over the search's fold assignments (memoised)."""
        key = tuple(sorted(subset))
        if key not in self._memo:
            self._memo[key] = batched_oof(self.phi(key), self.y, np.stack(self.folds), self.lam)
        return self._memo[key]

    def figures(self, subset: Sequence[str]) -> tuple[float, float]:
        """(CV accuracy, CV log-loss), each averaged over the fold assignments and rounded."""
        s = self.scores(subset)
        acc = np.mean(np.where(s >= 0, 1.0, -1.0) == self.y)
        loss = np.mean(np.logaddexp(0.0, -self.y * s))
        return round(float(acc), self.rounding), round(float(loss), self.rounding)

    def gap(self, subset: Sequence[str]) -> dict:
        """The paired CV gap of this subset's stack to the full bank's (`paired_gap`), rounded."""
        key = tuple(sorted(subset))
        if key not in self._gap:
            g = paired_gap(self.scores(key), self.scores(self.full), self.y)
            self._gap[key] = {k: round(v, self.rounding) for k, v in g.items()}
        return self._gap[key]

    def accuracy(self, subset: Sequence[str]) -> float:
        return self.figures(subset)[0]

    def rank(self, subset: Sequence[str]) -> tuple[float, float]:
        """Higher is better: CV accuracy, then lower CV log-loss (or the other way round)."""
        acc, loss = self.figures(subset)
        return (acc, -loss) if self.criterion == "accuracy" else (-loss, acc)


class ExpertSpace:
    """What the search chooses: one expert subset for every pair (selection/allocation.py: one per pair subset).
    A unit is an expert; a set of units costs `subset_cost`; `label` names a unit in the plan's records."""

    lazy = False           # full greedy steps (`_best`); few units

    def __init__(self, costs: dict, sources: dict | None = None, shared=None):
        self.units, self.costs, self.sources, self.shared = sorted(costs), costs, sources, shared

    def cost(self, units) -> float:
        return subset_cost(self.costs, units, self.sources, self.shared)

    def own(self, unit) -> float:
        return self.costs[unit]

    def label(self, unit) -> str:
        return unit

    def units_of(self, labels) -> list:
        return list(labels)

    def cv(self, rows, y, experts, categories, *, lam: float, eps: float, model: CostModel) -> SubsetCV:
        return SubsetCV(rows, y, experts, categories, lam=lam, eps=eps, model=model)

    def describe(self, units) -> dict:
        return {"experts": list(units)}


def _visit(cv: SubsetCV, space, units, how: str, seen: dict) -> None:
    key = tuple(sorted(units))
    if key not in seen:
        acc, loss = cv.figures(key)
        g = cv.gap(key)
        seen[key] = {"experts": [space.label(u) for u in key], "cost": space.cost(key),
                     "cv_accuracy": acc, "cv_logloss": loss, "cv_gap": g["gap"], "cv_gap_se": g["se"],
                     "found_by": how}


def _best(cands: list, key, base, stale: dict | None):
    """max(cands, key=key); with `stale` (a lazy space) the same greedy step evaluated lazily: keys are
    compared as gains over `base` (the current set's rank), a candidate's last gain stands in for its
    gain now until it is re-evaluated, and a re-evaluated candidate wins once no stale gain beats it
    (exact when gains only shrink as the set changes; it evaluates a few candidates per step, not all)."""
    if stale is None:
        return max(cands, key=key)
    unseen = ((math.inf, math.inf),)
    while True:
        u = max(cands, key=lambda c: stale.get(c, unseen))
        k = key(u)
        stale[u] = ((k[0][0] - base[0], k[0][1] - base[1]),) + k[1:]
        if all(stale[u] >= stale.get(c, unseen) for c in cands if c != u):
            return u


def search(cv: SubsetCV, space, limit: float) -> list[dict]:
    """Every unit set the greedy forward (within `limit`) and backward passes visit, in visiting order.
    Costs are the space's: adding a native expert whose source is not chosen pays for the source.
    A lazy space (the many moves of selection/allocation.py) takes each step lazily (`_best`)."""
    seen, chosen, lazy = {}, [], space.lazy

    def name(u) -> list:
        return [-ord(c) for c in space.label(u)]
    stale = {} if lazy else None
    while True:
        cands = [u for u in space.units if u not in chosen and space.cost(chosen + [u]) <= limit]
        if not cands:
            break
        best = _best(cands, lambda u: (cv.rank(chosen + [u]), -space.cost(chosen + [u]), name(u)),
                     cv.rank(chosen) if lazy else None, stale)
        chosen = chosen + [best]
        _visit(cv, space, chosen, "forward", seen)
    current = list(space.units)
    _visit(cv, space, current, "backward", seen)
    stale = {} if lazy else None
    while len(current) > 1:
        drop = _best(current, lambda u: (cv.rank([x for x in current if x != u]), space.own(u), name(u)),
                     cv.rank(current) if lazy else None, stale)
        current = [x for x in current if x != drop]
        _visit(cv, space, current, "backward", seen)
    return list(seen.values())


def near_full(v: dict, model: CostModel = CostModel()) -> bool:
    """Within noise of the full stack: the paired CV gap is not shown to exceed the tolerance."""
    return v["cv_gap"] + model.noise_z * v["cv_gap_se"] >= -model.tolerance - 1e-12


def check_feasible(space, limit: float, budget: str | None = None, full: float | None = None) -> None:
    """A located error unless the cheapest single unit (with what it is computed from) fits; it names the
    --budget given (0.33 is no subset of a bank of three equal experts; 1/3 is) and the least that fits."""
    unit = min(space.units, key=lambda u: (space.cost([u]), space.label(u)))
    cheapest = space.cost([unit])
    if cheapest > limit * (1 + 1e-12):
        given = f"--budget {budget} allows {limit:g}" if budget is not None else f"the budget is {limit:g}"
        bank = f" of the full bank's {full:g}" if full else ""
        least = (f"; give --budget {math.ceil(100 * cheapest / full) / 100:g} or more, or tokens={cheapest:g}"
                 if full else "")
        raise InputError(f"no expert subset fits: {given} per pair{bank}, and the cheapest expert, "
                         f"{space.label(unit)}, costs {cheapest:g}{least}", field="--budget")


def choose(visited: list[dict], limit: float, model: CostModel = CostModel()) -> dict:
    """The best visited subset within the budget, preferring those near the full stack (`near_full`)."""
    within = [v for v in visited if v["cost"] <= limit * (1 + 1e-12)]
    if not within:
        raise InputError(f"no visited expert subset fits the budget of {limit:g} per pair "
                         f"(the cheapest visited costs {min(v['cost'] for v in visited):g})", field="--budget")
    pool = [v for v in within if near_full(v, model)] or within
    first = (lambda v: (-v["cv_accuracy"], v["cv_logloss"])) if model.criterion == "accuracy" else \
        (lambda v: (v["cv_logloss"], -v["cv_accuracy"]))
    return min(pool, key=lambda v: (*first(v), v["cost"], len(v["experts"]), v["experts"]))


def fit_stack(rows: Sequence, y: np.ndarray, roles, *, experts, categories, lambdas=LAMBDAS, eps: float = EPS):
    """The stack (Eq. 6) on these non-test rows, lambda by 5-fold CV (heads.stack.cv_lambda) -> (head, info)."""
    probe = StackHead(list(experts), list(categories), np.ones(1), np.zeros(1), 0.0, eps)
    phi = probe.features(rows)
    lam, _ = cv_lambda(phi, y, fold_assignments([split_key(r) for r in rows], 5, 1, "baer-budget:lambda")[0], lambdas)
    rms, w = fit_stack_weights(phi, y, lam)
    return StackHead(list(experts), list(categories), rms, w, lam, eps), {"lambda": lam}


def labelled_rows(records: Sequence, spec: SplitSpec):
    from baer_fast.selection.fit import _check_groups, _check_rows, training_rows
    rows, roles = training_rows(records, spec)
    _check_rows(roles, records)
    _check_groups(rows)
    order = sorted(range(len(rows)), key=lambda i: rows[i].id)      # file order cannot change a float sum
    rows, roles = [rows[i] for i in order], [roles[i] for i in order]
    y = np.array([1.0 if r.label == "a" else -1.0 for r in rows])
    return rows, roles, y


def cv_inputs(records: Sequence, spec: SplitSpec, experts: Sequence[str], eps: float = EPS):
    """-> (the non-test labelled rows, their labels, their subsets, lambda of the full bank's stack on them)."""
    rows, roles, y = labelled_rows(records, spec)
    categories = sorted({r.subset for r in rows})
    _, info = fit_stack(rows, y, roles, experts=list(experts), categories=categories, lambdas=LAMBDAS, eps=eps)
    return rows, y, categories, info["lambda"]


def subset_cv_for(records: Sequence, spec: SplitSpec, experts: Sequence[str], eps: float = EPS,
                  model: CostModel = CostModel()):
    """-> (SubsetCV over the non-test labelled rows, those rows): lambda from the full bank's stack."""
    rows, y, categories, lam = cv_inputs(records, spec, experts, eps)
    return SubsetCV(rows, y, experts, categories, lam=lam, eps=eps, model=model), rows


def fit_scores(phi: np.ndarray, y: np.ndarray, ids: Sequence[str], tr: np.ndarray, te: np.ndarray,
               lam: float | None = None) -> np.ndarray:
    """The stack fitted on rows tr (lambda by CV inside them, as `fit_stack`, unless given), scored on te."""
    if lam is None:
        lam, _ = cv_lambda(phi[tr], y[tr], fold_assignments([ids[i] for i in tr], 5, 1, "baer-budget:lambda")[0])
    rms, w = fit_stack_weights(phi[tr], y[tr], lam)
    return (phi[te] / rms) @ w


@dataclass
class Nested:
    record: dict              # the JSON figures (gap, SE, subsets chosen in the folds)
    s_sub: np.ndarray         # [R, N] out-of-fold scores of the subset each training fold's search chose
    s_full: np.ndarray        # [R, N] out-of-fold scores of the full stack, same folds


def nested_search(rows: Sequence, y: np.ndarray, experts: Sequence[str], space, limit: float,
                  categories: Sequence[str], *, model: CostModel = CostModel(), eps: float = EPS) -> Nested:
    """The whole search cross-validated: inside each outer training fold, lambda, search and choice run
    exactly as on all rows; the chosen subset's stack and the full stack are scored on the held-out fold."""
    ids = [split_key(r) for r in rows]
    folds = fold_assignments(ids, 5, model.outer_repeats, "baer-budget:outer")
    whole = space.cv(rows, y, experts, categories, lam=1.0, eps=eps, model=model)     # features of every row
    phi_full = whole.phi(whole.full)
    s_sub, s_full, picks = np.zeros(folds.shape), np.zeros(folds.shape), {}
    # a many-move search (selection/allocation.py) takes minutes on large banks, and so does any search on
    # many rows (50k: over 20 minutes): say how far it is, once it has run longer than a progress period
    bar = progress(folds.shape[0] * 5, desc=f"budget search{' per subset' if space.lazy else ''} (nested CV)",
                   unit="fold", every_s=PROGRESS_EVERY_S, every_frac=1.0, delay=PROGRESS_EVERY_S,
                   quiet=not log.isEnabledFor(logging.INFO))
    for r in range(folds.shape[0]):
        for f in np.unique(folds[r]):
            tr, te = np.flatnonzero(folds[r] != f), np.flatnonzero(folds[r] == f)
            lam, _ = cv_lambda(phi_full[tr], y[tr], fold_assignments([ids[i] for i in tr], 5, 1,
                                                                     "baer-budget:lambda")[0])
            cv = space.cv([rows[i] for i in tr], y[tr], experts, categories, lam=lam, eps=eps, model=model)
            pick = choose(search(cv, space, limit), limit, model)["experts"]
            picks[", ".join(pick)] = picks.get(", ".join(pick), 0) + 1
            s_sub[r, te] = fit_scores(whole.phi(space.units_of(pick)), y, ids, tr, te)
            s_full[r, te] = fit_scores(phi_full, y, ids, tr, te, lam)
            bar.update(1)
    bar.close()
    g = {k: round(v, model.rounding) for k, v in paired_gap(s_sub, s_full, y).items()}
    g["near_full"] = near_full({"cv_gap": g["gap"], "cv_gap_se": g["se"]}, model)
    return Nested({**g, "folds": 5, "repeats": int(folds.shape[0]), "salt": "baer-budget:outer",
                   "chosen_in_folds": dict(sorted(picks.items()))}, s_sub, s_full)


@one_blas_thread
def plan_with_nested(records: Sequence, budget: str, *, spec: SplitSpec = SplitSpec(), costs_override=None,
                     model: CostModel = CostModel(), eps: float = EPS, warn: bool = True,
                     space_for=None) -> tuple[dict, Nested | None]:
    """-> (the budget record: chosen subset, its cost, the full bank's, every visited subset, the nested
    figures; the nested out-of-fold scores, None when model.outer_repeats is 0). warn: log when the
    subset is likely to cost accuracy (`warn_if_far`); off for a cascade's cheap stage, which never
    decides alone (its exits are held to the full head's accuracy by tau). space_for(rows, experts, costs,
    sources, costs_override, model): another search space (selection/allocation.py); None: ExpertSpace."""
    kind, value = parse_budget(budget)
    experts = sorted({k for r in records for k in r.experts})
    rows, y, categories, lam = cv_inputs(records, spec, experts, eps)
    costs, source = expert_costs(rows, experts, costs_override, model)
    sources = expert_sources(rows, experts)
    # measured costs of a bank whose prompts share prefixes: a subset pays whole shared nodes
    shared = shared_costs(rows) if source == "measured" else None
    space = ExpertSpace(costs, sources, shared) if space_for is None else \
        space_for(rows, experts, costs, sources, costs_override, model)
    cv = space.cv(rows, y, experts, categories, lam=lam, eps=eps, model=model)
    full = space.cost(space.units)
    limit = value * full if kind == "fraction" else value
    check_feasible(space, limit, budget, full)
    visited = search(cv, space, limit)
    best = choose(visited, limit, model)
    nested = (nested_search(rows, y, experts, space, limit, categories, model=model, eps=eps)
              if model.outer_repeats > 0 else None)
    plan = {"budget": str(budget), "limit_per_pair": limit, "cost_source": source,
            "expert_costs": costs, "expert_sources": sources, **({"shared_prefill": shared.to_json()} if shared else {}),
            "full_cost_per_pair": full, "full_cv_accuracy": cv.accuracy(cv.full),
            **space.describe(space.units_of(best["experts"])), "cost_per_pair": best["cost"],
            "fraction_of_full": best["cost"] / full if full > 0 else 0.0,
            "cv_accuracy": best["cv_accuracy"], "cv_gap": best["cv_gap"], "cv_gap_se": best["cv_gap_se"],
            "near_full": near_full(best, model), "tolerance": model.tolerance, "noise_z": model.noise_z,
            "nested": nested.record if nested else None, "visited": visited,
            "rule": f"greedy forward + backward over expert subsets, stack out-of-fold {model.criterion} "
                    f"({model.repeats} id-hashed 5-fold assignments, non-test rows); within budget, those with "
                    f"CV gap + {model.noise_z:g} SE >= -{model.tolerance:g} to the full stack preferred; best, "
                    "ties to the other CV figure, then the cheaper; nested: the same search inside each of "
                    f"{model.outer_repeats} x 5 outer training folds"}
    if warn:
        warn_if_far(plan)
    return plan, nested


def warn_if_far(plan: dict) -> None:
    """Log which verdict says the chosen subset may cost accuracy: the search folds', the nested CV's, or both."""
    n = plan["nested"]
    tol = 100 * plan["tolerance"]
    if not plan["near_full"]:
        log.warning("budget %s: no subset within the budget was shown to be within noise of the full stack; the "
                    "chosen one is not (search-fold CV gap %+.1f +- %.1f points, tolerance %.1f)", plan["budget"],
                    100 * plan["cv_gap"], 100 * plan["cv_gap_se"], tol)
    if n is not None and not n["near_full"]:
        log.warning("budget %s: the chosen subset is not within noise of the full stack by nested CV, which repeats "
                    "the whole search inside each training fold (gap %+.1f +- %.1f points, tolerance %.1f): expect "
                    "it to cost accuracy", plan["budget"], 100 * n["gap"], 100 * n["se"], tol)


def plan_budget(records: Sequence, budget: str, *, spec: SplitSpec = SplitSpec(), costs_override=None,
                model: CostModel = CostModel(), eps: float = EPS, space_for=None) -> dict:
    """-> the budget record (`plan_with_nested`)."""
    return plan_with_nested(records, budget, spec=spec, costs_override=costs_override, model=model, eps=eps,
                            space_for=space_for)[0]


def fit_budget(records: Sequence, budget: str, *, condition: str, spec: SplitSpec = SplitSpec(),
               costs_override=None, model: CostModel = CostModel(), space_for=None, **fit_kw) -> dict:
    """Artifact fitted on the chosen subset only, with the budget record under `budget`. With a per-subset
    space (selection/allocation.py) each record keeps its subset's experts, and `allocation` is recorded."""
    from baer_fast.heads.allocation import allocate
    from baer_fast.selection.fit import fit_condition, subset_roles
    plan = plan_budget(records, budget, spec=spec, costs_override=costs_override, model=model, space_for=space_for)
    fit_kw.update(subset_roles({k for r in records for k in r.experts}, set(plan["experts"]),
                               groups=list((plan.get("allocation") or {}).values()),
                               **{k: fit_kw.get(k) for k in ("reference_expert", "pointwise_expert")}))
    mine = restrict(records, plan["experts"])
    if "allocation" in plan:
        mine = allocate(mine, plan["allocation"], plan["experts"])
    art = fit_condition(mine, condition=condition, spec=spec, **fit_kw)
    art["budget"] = plan
    if "allocation" in plan:
        art["allocation"] = plan["allocation"]
    return art
