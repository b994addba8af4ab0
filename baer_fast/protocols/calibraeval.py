"""CalibraEval (Li et al., ACL 2025) as a derived expert: three prompts, the published objective.

Prompts, P(token A) over {A, B}: p1 original [A: a][B: b], p2 labels exchanged [B: b][A: a],
p3 reversed order [A: b][B: a]. Swap-closed, the expert reads four prompts: order ab and ba
(exactly `direct`'s, free) and the label-exchanged "ab/x" = [B: a][A: b], "ba/x" = [B: b][A: a].
Raw runs (canonical u): [u_ab, u_ba, u_ab/x, u_ba/x], two triplets (p1, p2, p3) per pair.

Objective: an order-preserving g: [0, 1] -> [0, 1] minimising over the fitting rows' triplets
(non-test, labels never read) mean[(g(p1) + g(p3) - 1)^2 + (g(p1) - g(p2))^2]
- lam * mean[(g(p1) - g(p3))^2] (lam = 0.05, the official run's: it keeps g from collapsing
to 1/2); g piecewise linear over the sorted observed points, solved by projected gradient from
the identity with an isotonic projection. Output runs [T_a, 1 - T_b] with
T = [g(p1) + g(p2) + 1 - g(p3)] / 3. Deviations: docs/protocols.md. Pure numpy / scikit-learn.
"""
from __future__ import annotations

import numpy as np

from baer_fast.protocols.base import ORDERS, Prompt, prob, question_segment, response_segment

NAME = "calibraeval"
SOURCE = NAME            # its own raw runs (the four prompts); `apply` maps them to calibrated runs
LABELS = ("A", "B")
LAMBDA = 0.05
ITERS, TOL = 5000, 1e-12


def prompts(question: str, a: str, b: str) -> list[Prompt]:
    from baer_fast.protocols import direct
    exchanged = [Prompt(f"{o}/x", (question_segment(question), response_segment("B", first),
                                    response_segment("A", second), direct.INSTRUCTION), LABELS)
                 for o, (first, second) in zip(ORDERS, ((a, b), (b, a)))]
    return direct.prompts(question, a, b) + exchanged


def runs(lp: dict) -> list[float]:
    """Canonical u = P(a better) of each prompt; in "ab/x" a is labelled B, in "ba/x" A."""
    return [prob(lp["ab"], 0), prob(lp["ba"], 1), prob(lp["ab/x"], 1), prob(lp["ba/x"], 0)]


def triplets(r) -> list:
    """Raw runs -> the two (p1, p2, p3) P(token A) triplets: a's, then b's (None where missing)."""
    if r is None or len(r) != 4:
        return [None, None]
    u_ab, u_ba, u_abx, u_bax = r
    pa = {"ab": u_ab, "ba": None if u_ba is None else 1.0 - u_ba,
          "ab/x": None if u_abx is None else 1.0 - u_abx, "ba/x": u_bax}
    out = [(pa["ab"], pa["ba/x"], pa["ba"]), (pa["ba"], pa["ab/x"], pa["ab"])]
    return [t if None not in t else None for t in out]


def _objective(v, idx, lam):
    """(value, gradient) of the published objective at knot values v; idx: triplets as knot indices."""
    g1, g2, g3 = v[idx[:, 0]], v[idx[:, 1]], v[idx[:, 2]]
    r1, r2, r3 = g1 + g3 - 1.0, g1 - g2, g1 - g3
    n = len(idx)
    f = float((r1 @ r1 + r2 @ r2 - lam * (r3 @ r3)) / n)
    k = len(v)
    grad = (np.bincount(idx[:, 0], 2 * r1 + 2 * r2 - 2 * lam * r3, k) + np.bincount(idx[:, 1], -2 * r2, k)
            + np.bincount(idx[:, 2], 2 * r1 + 2 * lam * r3, k)) / n
    return f, grad


def _solve(idx, knots, lam) -> np.ndarray:
    """Projected gradient with step 1/L (L bounds the Hessian's rows: each triplet adds at most
    3 (4 + 2 lam) / n per occurrence of a knot), so the objective never increases."""
    from sklearn.isotonic import isotonic_regression
    occurrences = np.bincount(idx.ravel(), minlength=len(knots))
    step = len(idx) / (3.0 * (4.0 + 2.0 * lam) * occurrences.max())
    v = knots.copy()
    for _ in range(ITERS):
        nxt = isotonic_regression(v - step * _objective(v, idx, lam)[1], y_min=0.0, y_max=1.0, increasing=True)
        done = np.max(np.abs(nxt - v)) < TOL
        v = nxt
        if done:
            break
    return v


def fit(rows, *, lam: float = LAMBDA) -> dict:
    """rows: raw calibraeval runs of non-test pairs -> frozen params (plain JSON). Triplets are
    sorted first, so the fit does not depend on row order, and a row and its swap give the same
    triplets (exchanged): the fit is the same bit for bit."""
    t = np.asarray([x for r in rows for x in triplets(r) if x is not None], dtype=np.float64).reshape(-1, 3)
    if len(t) == 0:
        raise ValueError("calibraeval: no complete runs of its three prompts to fit the calibration map on")
    t = t[np.lexsort(t.T[::-1])]
    knots, inverse = np.unique(t.ravel(), return_inverse=True)
    idx = inverse.reshape(-1, 3)
    values = _solve(idx, knots, lam)
    return {"method": NAME, "source": SOURCE, "lambda": lam, "knots": knots.tolist(), "values": values.tolist(),
            "n_fit": int(len(t) // 2), "objective": _objective(values, idx, lam)[0],
            "objective_identity": _objective(knots, idx, lam)[0]}


def g(params: dict, p: float) -> float:
    return float(np.interp(p, params["knots"], params["values"]))


def apply(params: dict, runs) -> list:
    """Raw runs -> CalibraEval runs [T_a, 1 - T_b] (canonical; None where a prompt is missing)."""
    out = []
    for t in triplets(runs):
        out.append(None if t is None else (g(params, t[0]) + g(params, t[1]) + 1.0 - g(params, t[2])) / 3.0)
    return [out[0], None if out[1] is None else 1.0 - out[1]]
