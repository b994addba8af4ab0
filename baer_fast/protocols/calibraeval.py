"""CalibraEval (Li et al. 2025) as a derived expert, adapted to two display orders.

An order-preserving map g: [0, 1] -> [0, 1] is applied to P(first shown). An unbiased judge
gives a and b complementary probabilities whichever is shown first, so over the fitting rows
(non-test, labels never read) we minimise the label-free objective

    L(g) = sum_i (g(x_i) + g(y_i) - 1)^2 + lam * sum_j (g(t_j) - t_j)^2,   g non-decreasing,

with x_i = P_ab(first) (that is a), y_i = P_ba(first) (that is b), and t_j every observed
point. The first term is the paper's swap-consistency target; the second keeps g from
collapsing to the constant 1/2 (which the consistency term alone prefers) — this is our
documented adaptation, not the official optimiser (whose gradient is wrong). g is represented
on the sorted observed points (value at the first knot plus non-negative increments, so it is
monotone by construction), solved exactly with L-BFGS-B and an analytic gradient, and extended
isotonically between knots by linear interpolation, constant beyond them.

P(a) = [g(p1) + 1 - g(p3)] / 2 is the mean of the two runs [g(x), 1 - g(y)]: the paper's
three-prompt average [g(p1) + g(p2) + 1 - g(p3)] / 3 with the ID-swapped prompt p2 dropped,
because the shared prompt skeleton fixes the ID tokens. Pure numpy / scipy; no torch.
"""
from __future__ import annotations

import numpy as np

NAME = "calibraeval"
SOURCE = "direct"
LAMBDA = 1.0


def _points(rows) -> tuple[np.ndarray, np.ndarray]:
    ok = np.asarray([r for r in rows if r is not None and len(r) == 2 and None not in r],
                    dtype=np.float64).reshape(-1, 2)
    return ok[:, 0], 1.0 - ok[:, 1]


def _objective(theta, ix, iy, knots, counts, lam):
    v = theta[0] + np.concatenate([[0.0], np.cumsum(theta[1:])])
    r = v[ix] + v[iy] - 1.0
    f = float(r @ r + lam * (counts * (v - knots) ** 2).sum())
    gv = 2.0 * (np.bincount(ix, r, len(v)) + np.bincount(iy, r, len(v))) + 2.0 * lam * counts * (v - knots)
    tail = np.cumsum(gv[::-1])[::-1]          # d v_j / d increment_k = 1 for j >= k
    return f, np.concatenate([[tail[0]], tail[1:]])


def fit(rows, *, lam: float = LAMBDA) -> dict:
    """rows: direct runs [[u_ab, u_ba], ...] of non-test pairs -> frozen params (plain JSON)."""
    from scipy.optimize import minimize

    x, y = _points(rows)
    if len(x) == 0:
        raise ValueError("calibraeval: no complete direct runs to fit the calibration map on")
    knots, inverse, counts = np.unique(np.concatenate([x, y]), return_inverse=True, return_counts=True)
    ix, iy = inverse[: len(x)], inverse[len(x):]
    theta0 = np.concatenate([[knots[0]], np.diff(knots)])      # start at the identity
    bounds = [(0.0, 1.0)] + [(0.0, None)] * (len(knots) - 1)
    res = minimize(_objective, theta0, args=(ix, iy, knots, counts.astype(np.float64), lam), jac=True,
                   method="L-BFGS-B", bounds=bounds, options={"maxiter": 5000, "ftol": 1e-15, "gtol": 1e-10})
    values = np.clip(res.x[0] + np.concatenate([[0.0], np.cumsum(res.x[1:])]), 0.0, 1.0)
    return {"method": NAME, "source": SOURCE, "lambda": lam, "knots": knots.tolist(),
            "values": values.tolist(), "n_fit": int(len(x)), "objective": float(res.fun)}


def g(params: dict, p: float) -> float:
    return float(np.interp(p, params["knots"], params["values"]))


def apply(params: dict, runs) -> list:
    """Direct runs [u_ab, u_ba] -> CalibraEval runs [g(x), 1 - g(y)] (canonical; None stays None)."""
    u_ab, u_ba = runs
    return [None if u_ab is None else g(params, u_ab),
            None if u_ba is None else 1.0 - g(params, 1.0 - u_ba)]
