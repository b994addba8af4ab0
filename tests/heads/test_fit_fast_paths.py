"""fit's faster paths give the bits of the simple code they replace (exact equality, small data)."""
from __future__ import annotations

import numpy as np
from sklearn.ensemble import RandomForestClassifier

from baer_fast.heads.forest import CompiledForest
from baer_fast.heads.router import (CV_TREES, FOREST_PARAMS, MODEL_KINDS, choose_model, cv_routed_correct,
                                    fit_forest)


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
        ref = cv_routed_correct((k,), rho, t, z, y, folds)[k]      # one kind alone
        assert np.array_equal(correct[k], ref) and table[k] == float(ref.mean())
    assert kind == max(MODEL_KINDS, key=lambda k: table[k])
