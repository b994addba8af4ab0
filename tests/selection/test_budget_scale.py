"""The budget search's faster paths give the figures of the plain ones, bit for bit."""
from __future__ import annotations

import numpy as np
import pytest

from baer_fast.selection.budget import batched_oof, one_blas_thread


def batched_oof_ref(phi, y, folds, lam, iters=50):
    """The batched Newton fit as first written: the Hessian's product formed over the transposed view."""
    n_f = int(folds.max()) + 1
    train = np.concatenate([(folds != f) for f in range(n_f)]).astype(np.float64)
    n_tr = np.maximum(train.sum(axis=1), 1.0)
    rms = np.sqrt(train @ phi ** 2 / n_tr[:, None])
    x = phi[None, :, :] / np.where(rms > 0, rms, 1.0)[:, None, :]
    w, eye = np.zeros((x.shape[0], x.shape[2])), lam * np.eye(x.shape[2])
    xt = x.transpose(0, 2, 1)
    for _ in range(iters):
        sig = 0.5 * (1.0 - np.tanh(0.5 * y * (x @ w[:, :, None])[:, :, 0]))
        grad = -(xt @ (train * y * sig)[:, :, None])[:, :, 0] / n_tr[:, None] + lam * w
        hess = (xt * (train * sig * (1.0 - sig))[:, None, :]) @ x / n_tr[:, None, None] + eye
        step = np.linalg.solve(hess, grad[:, :, None])[:, :, 0]
        w -= step
        if np.max(np.abs(step)) < 1e-10:
            break
    s, held = (x @ w[:, :, None])[:, :, 0], 1.0 - train
    return (s * held).reshape(n_f, folds.shape[0], -1).sum(axis=0)


@pytest.mark.parametrize("n,d,lam", [(97, 7, 0.01), (600, 24, 1.0), (1500, 13, 0.001)])
def test_batched_oof_equals_the_first_formula_bit_for_bit(n, d, lam):
    rng = np.random.default_rng(n)
    y = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    phi = rng.normal(size=(n, d)) + 0.7 * y[:, None]
    phi[:, -1] = 0.0                                       # a column with no evidence (rms 0)
    folds = np.stack([rng.permutation(np.arange(n) % 5) for _ in range(3)])
    assert np.array_equal(batched_oof(phi, y, folds, lam), batched_oof_ref(phi, y, folds, lam))


def test_one_blas_thread_sets_one_thread_inside_and_restores_after():
    from threadpoolctl import threadpool_info

    def blas():
        return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    before = blas()
    assert one_blas_thread(blas)() == [1] * len(before)
    assert blas() == before
