"""Deployed heads score each row on its own: the same bits at any batch size or position (DESIGN,
determinism). BLAS gemv (`x @ w`) blocks rows and moves the last bit with the batch; the heads use
`heads.logistic.rowdot`, which sums each row alone."""
import numpy as np

from baer_fast.heads.logistic import rowdot
from baer_fast.heads.router import LogisticModel
from baer_fast.heads.stack import StackHead


def _rows(seed, n=64, d=23):
    rng = np.random.default_rng(seed)
    scale = rng.choice([1e-3, 1.0, 1e3], size=d)
    return rng.normal(size=(n, d)) * scale, rng.normal(size=d), rng


def _each_alone(f, x):
    return np.array([f(x[i:i + 1])[0] for i in range(len(x))])


def test_rowdot_gives_every_row_the_same_bits_alone_and_permuted():
    for seed in range(20):
        x, w, rng = _rows(seed)
        full = rowdot(x, w)
        np.testing.assert_array_equal(full, _each_alone(lambda v: rowdot(v, w), x))
        p = rng.permutation(len(x))
        np.testing.assert_array_equal(rowdot(x[p], w), full[p])
        # it is the dot product: two summation orders of D terms each round within D eps sum|x_i w_i|
        bound = 2 * x.shape[1] * np.finfo(float).eps * np.sum(np.abs(x * w), axis=1)
        assert np.all(np.abs(full - x @ w) <= bound)


def test_the_stack_head_and_the_router_model_score_rows_alone():
    for seed in range(10):
        x, w, rng = _rows(seed)
        head = StackHead(["e"], [], rms=rng.uniform(0.1, 3.0, x.shape[1]), weights=w, lam=1.0)
        full = head.score_features(x)
        np.testing.assert_array_equal(full, _each_alone(head.score_features, x))
        p = rng.permutation(len(x))
        np.testing.assert_array_equal(head.score_features(x[p]), full[p])
        model = LogisticModel(coef=w, intercept=0.3, mean=rng.normal(size=x.shape[1]),
                              scale=rng.uniform(0.5, 2.0, x.shape[1]))
        xr = x * 1e-3            # logits of a few units: no overflow in exp
        full = model.predict(xr)
        np.testing.assert_array_equal(full, _each_alone(model.predict, xr))
