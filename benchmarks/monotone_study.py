"""Does a monotone shrunk stack hold better? (#18 screen)

    python benchmarks/monotone_study.py FIRST N OUT.jsonl [ONLY]

The shrunk stack's weights are free in sign: on small dev sets a ridge fit over 5-15 correlated
protocols gives some of them negative weight, so that the head's score *falls* when that protocol's
evidence for A rises. Stacking's classic remedy (Breiman 1996, "Stacked regressions"; the
non-negative meta-learner of the super learner) is to forbid that. Here it is stated for the stack
map: expert k enters the score as z_k (a / r_z + b / (r_zt (1 + 4 d_k))), d_k in [0, 1] its run
spread, so the score is non-decreasing in every expert's z at every spread iff
a / r_z + b / r_zt >= 0 and a / r_z + b / (5 r_zt) >= 0. The interaction columns (the subset /
category x mean-z blocks) stay free. Fitted by L-BFGS-B on the two monotone coordinates per expert
(bounds >= 0), the same objective, prior (c times the mean) and subagging as deployed; when the
unconstrained Newton fit already satisfies the bounds it is the answer (convexity). lambda by CV
log-loss on the monotone path over `fit`'s final folds, ties to the larger.

A screen: test accuracy of the deployed head (bshrunk_own, as `bag-*`) and the monotone one
(bshrunk_mono), no nested folds, so `candidate_study.py replay --grid` compares them deployed
everywhere. A study tool: never asserts, never runs in the tests.
"""
import os, sys
for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(v, "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np
from candidate_variants import bounded_minimize, prior_fit, screen_cell, subagged, cell_arguments, write_cells
from baer_fast.heads.logistic import newton_logistic
from baer_fast.heads.stack import SHRUNK_LAMBDAS, mean_direction, training_rms

SPREAD_MAX = 4.0     # zt = z / (1 + 4 d), d <= 1


def monotone_map(rms, K):
    """A [D, D]: w = A theta, theta's expert coordinates (2k, 2k+1) = the raw z-coefficients at d = 0 and d = 1."""
    D = len(rms)
    A = np.eye(D)
    for k in range(K):
        rz, rt = rms[2 * k], rms[2 * k + 1]
        # raw coefficients alpha = w_z / rz, beta = w_zt / rt; u0 = alpha + beta, u1 = alpha + beta / 5
        # beta = (u0 - u1) * 5 / 4, alpha = (5 u1 - u0) / 4
        f = 1.0 + SPREAD_MAX
        blk = np.array([[-1.0 / (f - 1) * rz, f / (f - 1) * rz],       # w_z  = rz * (f u1 - u0) / (f - 1)
                        [f / (f - 1) * rt, -f / (f - 1) * rt]])        # w_zt = rt * f (u0 - u1) / (f - 1)
        A[2 * k:2 * k + 2, 2 * k:2 * k + 2] = blk
    return A


def monotone_fit(x, y, lam, K, rms, prior, off):
    """argmin mean log(1 + exp(-y x.w)) + lam/2 |w - prior|^2 subject to monotonicity (w = prior + v)."""
    v = newton_logistic(x, y, lam, intercept=False, offset=off)
    w = prior + v
    A = monotone_map(rms, K)
    theta0 = np.linalg.solve(A, w)
    if np.all(theta0[:2 * K] >= -1e-12):
        return w
    xa = x @ A
    n = len(y)

    def fg(th):
        m = y * (xa @ th)
        loss = float(np.mean(np.logaddexp(0.0, -m)))
        s = 0.5 * (1.0 - np.tanh(0.5 * m))
        r = A @ th - prior
        return loss + 0.5 * lam * float(r @ r), -(xa.T @ (y * s)) / n + lam * (A.T @ r)

    bounds = [(0.0, None)] * (2 * K) + [(None, None)] * (len(w) - 2 * K)
    th = bounded_minimize(fg, np.maximum(theta0, np.r_[np.zeros(2 * K), np.full(len(w) - 2 * K, -np.inf)]), bounds)
    return A @ th


def mono_weights(phi, y, lam, K, parts=None):
    rms = training_rms(phi)
    e = mean_direction(K, phi.shape[1])
    return rms, subagged(phi / rms, y, parts, lambda xk, yk: monotone_fit(xk, yk, lam, K, rms, *prior_fit(xk, yk, e)))


def mono_path(phi_tr, y_tr, phi_te, K, lambdas=SHRUNK_LAMBDAS, ids_tr=None):
    rms, out = training_rms(phi_tr), []
    for lam in lambdas:
        _, w = mono_weights(phi_tr, y_tr, lam, K)
        out.append((phi_te / rms) @ w)
    return np.stack(out)


if __name__ == "__main__":
    def cell(c, name, i):
        return screen_cell(c, name, i, "bshrunk_mono", SHRUNK_LAMBDAS, mono_path, mono_weights, "lam")

    sys.exit(write_cells(cell_arguments(__doc__).parse_args(), cell, "monotone_study"))
