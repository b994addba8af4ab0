"""CalibraEval (Li et al. 2025) as a derived expert, adapted to two display orders.

An order-preserving map g: [0, 1] -> [0, 1] is applied to P(first shown). An unbiased judge
gives a and b complementary probabilities whichever is shown first, so over the fitting rows
(non-test, labels never read) we minimise the label-free objective

    L(g) = sum_i (g(x_i) + g(y_i) - 1)^2 + lam * sum_j (g(t_j) - t_j)^2,   g non-decreasing,

with x_i = P_ab(first) (that is a), y_i = P_ba(first) (that is b), and t_j every observed
point. The first term is the paper's swap-consistency target; the second keeps g from
collapsing to the constant 1/2 (which the consistency term alone prefers) — this is our
documented adaptation, not the official optimiser (whose gradient is wrong). g is represented
by its values on the sorted observed points; the convex quadratic is minimised exactly by
accelerated projected gradient, projecting onto non-decreasing values in [0, 1] with an
isotonic regression (PAVA), and g is extended isotonically between knots by linear
interpolation, constant beyond them.

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


def _loss_grad(v, ix, iy, knots, counts, lam):
    r = v[ix] + v[iy] - 1.0
    f = float(r @ r + lam * (counts * (v - knots) ** 2).sum())
    grad = 2.0 * (np.bincount(ix, r, len(v)) + np.bincount(iy, r, len(v))) + 2.0 * lam * counts * (v - knots)
    return f, grad


def _solve(ix, iy, knots, counts, lam, *, iters: int = 5000, tol: float = 1e-12) -> np.ndarray:
    """Accelerated projected gradient (FISTA); the projection onto non-decreasing [0, 1] values is
    an isotonic regression. The loss is a convex quadratic, so this reaches its minimiser."""
    from sklearn.isotonic import isotonic_regression

    deg = np.bincount(ix, minlength=len(knots)) + np.bincount(iy, minlength=len(knots))
    step = 1.0 / (4.0 * deg.max() + 2.0 * lam * counts.max())     # 1 / Lipschitz constant of the gradient
    v = knots.copy()                                               # start at the identity
    w, t = v.copy(), 1.0
    for _ in range(iters):
        v_next = isotonic_regression(w - step * _loss_grad(w, ix, iy, knots, counts, lam)[1],
                                     y_min=0.0, y_max=1.0, increasing=True)
        t_next = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * t * t))
        w = v_next + ((t - 1.0) / t_next) * (v_next - v)
        done = np.max(np.abs(v_next - v)) < tol
        v, t = v_next, t_next
        if done:
            break
    return v


def fit(rows, *, lam: float = LAMBDA) -> dict:
    """rows: direct runs [[u_ab, u_ba], ...] of non-test pairs -> frozen params (plain JSON)."""
    x, y = _points(rows)
    if len(x) == 0:
        raise ValueError("calibraeval: no complete direct runs to fit the calibration map on")
    knots, inverse, counts = np.unique(np.concatenate([x, y]), return_inverse=True, return_counts=True)
    ix, iy, counts = inverse[: len(x)], inverse[len(x):], counts.astype(np.float64)
    values = _solve(ix, iy, knots, counts, lam)
    loss = _loss_grad(values, ix, iy, knots, counts, lam)[0]
    return {"method": NAME, "source": SOURCE, "lambda": lam, "knots": knots.tolist(),
            "values": values.tolist(), "n_fit": int(len(x)), "objective": loss}


def g(params: dict, p: float) -> float:
    return float(np.interp(p, params["knots"], params["values"]))


def apply(params: dict, runs) -> list:
    """Direct runs [u_ab, u_ba] -> CalibraEval runs [g(x), 1 - g(y)] (canonical; None stays None)."""
    u_ab, u_ba = runs
    return [None if u_ab is None else g(params, u_ab),
            None if u_ba is None else 1.0 - g(params, 1.0 - u_ba)]
