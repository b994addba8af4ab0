"""Does a sparse deviation from the mean hold better than a ridge one? (#18 screen)

    python benchmarks/sparse_study.py FIRST N OUT.jsonl [ONLY]

The deployed shrunk stack pulls its weights toward c times the mean with a ridge penalty, which
spreads any deviation over correlated protocols. Where one protocol of a strong backbone is better
than the rest (the GPT-4 conditions, where most lost cells are) the natural prior is the opposite:
the mean, plus a few protocols moved. Here the deviation v = w - c e gets an L1 penalty
(lam_1 |v|_1, plus a ridge of RIDGE so separable rows stay finite), with lam_1 on a grid relative to
lam_max (the smallest lam_1 at which v = 0 is optimal: the largest gradient at the prior), chosen by
CV log-loss over `fit`'s final folds (ties to the larger), then subagged as deployed. Solved by
L-BFGS-B on v = v+ - v-, v+/- >= 0 (a smooth bound-constrained form of the same convex problem).

A screen: test accuracy of the deployed head (bshrunk_own, as `bag-*`) and the sparse one
(bshrunk_l1), no nested folds; `candidate_study.py replay --grid` compares them deployed everywhere.
A study tool: never asserts, never runs in the tests.
"""
import os, sys
for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(v, "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np
from candidate_variants import bounded_minimize, prior_fit, screen_cell, subagged, cell_arguments, write_cells
from baer_fast.heads.stack import mean_direction, training_rms

RIDGE = 1e-3                                   # keeps the fit finite on separable rows
FRACTIONS = (1.0, 0.5, 0.25, 0.1, 0.05, 0.02, 0.01)   # lam_1 / lam_max, strongest first


def prior_of(x, y, K):
    """c times the mean's weights, c fitted first (the deployed prior)."""
    return prior_fit(x, y, mean_direction(K, x.shape[1]))[0]


def lam_max(x, y, prior):
    m = y * (x @ prior)
    s = 0.5 * (1.0 - np.tanh(0.5 * m))
    return float(np.max(np.abs(x.T @ (y * s)) / len(y)))


def l1_fit(x, y, prior, lam1, v0=None):
    """argmin mean log(1 + exp(-y x.(prior + v))) + lam1 |v|_1 + RIDGE/2 |v|^2 -> v."""
    n, d = x.shape
    yx = x * y[:, None]
    off = yx @ prior

    def fg(t):
        v = t[:d] - t[d:]
        m = off + yx @ v
        s = 0.5 * (1.0 - np.tanh(0.5 * m))
        g = -(yx.T @ s) / n + RIDGE * v
        f = float(np.mean(np.logaddexp(0.0, -m))) + lam1 * float(t.sum()) + 0.5 * RIDGE * float(v @ v)
        return f, np.concatenate([g + lam1, -g + lam1])

    t0 = np.zeros(2 * d) if v0 is None else np.concatenate([np.maximum(v0, 0), np.maximum(-v0, 0)])
    t = bounded_minimize(fg, t0, [(0.0, None)] * (2 * d))
    return t[:d] - t[d:]


def l1_path(phi_tr, y_tr, phi_te, K, fractions=FRACTIONS, ids_tr=None):
    rms = training_rms(phi_tr)
    x = phi_tr / rms
    prior = prior_of(x, y_tr, K)
    top, v, out = lam_max(x, y_tr, prior), None, []
    for f in fractions:
        v = l1_fit(x, y_tr, prior, f * top, v)
        out.append((phi_te / rms) @ (prior + v))
    return np.stack(out)


def l1_weights(phi, y, frac, K, parts):
    rms = training_rms(phi)

    def fit(xk, yk):
        prior = prior_of(xk, yk, K)
        return prior + l1_fit(xk, yk, prior, frac * lam_max(xk, yk, prior))

    return rms, subagged(phi / rms, y, parts, fit)


if __name__ == "__main__":
    def cell(c, name, i):
        return screen_cell(c, name, i, "bshrunk_l1", FRACTIONS, l1_path, l1_weights, "frac")

    sys.exit(write_cells(cell_arguments(__doc__).parse_args(), cell, "sparse_study"))
