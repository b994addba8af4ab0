"""fit's faster paths give the bits of the simple code they replace (exact equality, small data)."""
from __future__ import annotations

import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier

from baer_fast.heads.forest import CompiledForest
from baer_fast.heads.logistic import MAX_ITER, _loss, newton_logistic
from baer_fast.heads.router import (CV_TREES, FOREST_PARAMS, MODEL_KINDS, choose_model, cv_routed_correct,
                                    fit_forest)


def newton_ref(x, y, lam, *, intercept=False, w0=None, tol=1e-10, offset=None):
    """The solver as first written: margins recomputed at the top of every iteration."""
    n, d = x.shape
    xa = np.concatenate([x, np.ones((n, 1))], axis=1) if intercept else x
    pen = np.full(xa.shape[1], float(lam))
    if intercept:
        pen[-1] = 0.0
    w = np.zeros(xa.shape[1]) if w0 is None else np.array(w0, np.float64)
    yx = xa * y[:, None]
    yo = np.zeros(n) if offset is None else y * offset

    def objective(v):
        return _loss(yx @ v + yo) + 0.5 * float(np.sum(pen * v * v))

    f = objective(w)
    for _ in range(MAX_ITER):
        m = yx @ w + yo
        s = 0.5 * (1.0 - np.tanh(0.5 * m))
        g = -(yx.T @ s) / n + pen * w
        if np.max(np.abs(g)) < tol:
            break
        h = (xa.T * (s * (1.0 - s))) @ xa / n + np.diag(pen) + 1e-12 * np.eye(xa.shape[1])
        step = np.linalg.solve(h, g)
        decrement = float(g @ step)
        if decrement < 1e-24:
            break
        t = 1.0
        while t > 1e-8:
            cand = w - t * step
            fc = objective(cand)
            if fc <= f - 1e-4 * t * decrement:
                break
            t *= 0.5
        else:
            break
        w, f = cand, fc
    return w


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("intercept", [False, True])
@pytest.mark.parametrize("warm", [False, True])
def test_newton_reusing_the_accepted_margins_is_bit_identical(seed, intercept, warm):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(97, 5))
    y = np.where(x @ rng.normal(size=5) + rng.normal(size=97) > 0, 1.0, -1.0)
    x[:7] *= 40.0 * (seed + 1)                         # near-separable rows: line searches that halve
    kw = dict(intercept=intercept, offset=rng.normal(size=97) if seed == 2 else None,
              w0=rng.normal(size=5 + intercept) if warm else None)
    for lam in (1e-3, 0.1, 10.0):
        assert np.array_equal(newton_logistic(x, y, lam, **kw), newton_ref(x, y, lam, **kw))


def _rows(seed=0, n=60, k=3, d=7):
    rng = np.random.default_rng(seed)
    rho = np.round(rng.normal(size=(n, k, d)), 3)
    rho[:, :, 0] = rng.integers(0, 2, size=(n, k))     # a one-hot-like column, as rho has
    t = (rho[:, :, 1] + rng.normal(size=(n, k)) > 0).astype(np.int64)
    z = rng.normal(size=(n, k))
    y = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    return rho, t, z, y


def test_forest_on_float32_column_major_rows_equals_sklearn_on_the_float64_rows():
    rho, t, _, _ = _rows()
    x, tt = rho.reshape(-1, rho.shape[2]), t.reshape(-1)
    ref = RandomForestClassifier(n_jobs=1, **dict(FOREST_PARAMS, n_estimators=CV_TREES)).fit(x, tt)
    assert fit_forest(x, tt, CV_TREES).forest.to_json() == CompiledForest.from_sklearn(ref).to_json()


def test_choose_model_fold_by_fold_equals_each_kind_on_its_own():
    rho, t, z, y = _rows(1)
    folds = np.arange(len(y)) % 3
    kind, table, correct = choose_model(rho, t, z, y, folds)
    for k in MODEL_KINDS:
        ref = cv_routed_correct(k, rho, t, z, y, folds)
        assert np.array_equal(correct[k], ref) and table[k] == float(ref.mean())
    assert kind == max(MODEL_KINDS, key=lambda k: table[k])
