"""The stack's odd logistic fit: no intercept (a check that fails for a model with one), Newton vs sklearn."""
from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from baer_fast.heads.logistic import newton_logistic
from baer_fast.heads.stack import fit_odd_logistic


def _data(seed=0, n=150, d=4, bias=1.5):
    """Labels with a strong prior towards a: a model with an intercept learns b != 0."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d))
    y = np.where(x @ np.linspace(1, -0.5, d) + bias + rng.normal(size=n) > 0, 1.0, -1.0)
    return x, y


def odd_violation(score, x: np.ndarray) -> float:
    """max |s(x) + s(-x)| and |s(0)|: zero exactly when the scoring function has no intercept."""
    return float(max(np.max(np.abs(score(x) + score(-x))), abs(score(np.zeros((1, x.shape[1])))[0])))


def test_the_oddness_check_fails_for_a_model_fitted_with_an_intercept():
    x, y = _data()
    m = LogisticRegression(C=1.0).fit(x, y)
    assert odd_violation(m.decision_function, x) > 0.1


def test_the_stack_fit_passes_the_same_check():
    x, y = _data()
    w = fit_odd_logistic(x, y, 0.01)
    from tests.fixtures.tolerances import fp64_tol
    assert odd_violation(lambda v: v @ w, x) <= fp64_tol(4 * x.shape[1], 1 + np.abs(x @ w).max())   # two dot products


@pytest.mark.parametrize("lam", [10.0, 0.1, 0.001])
def test_newton_matches_sklearn_on_the_same_objective(lam):
    x, y = _data(seed=2, bias=0.3)
    w = newton_logistic(x, y, lam)
    # sklearn: C * sum(loss) + |w|^2 / 2  ==  n C (mean loss + |w|^2 / (2 n C)), so C = 1 / (n lam)
    ref = LogisticRegression(C=1.0 / (len(y) * lam), fit_intercept=False, tol=1e-12, max_iter=10_000).fit(x, y)
    # both stop at a gradient max-norm below ~1e-10; the Hessian's smallest eigenvalue >= lam bounds |dw|
    assert np.max(np.abs(w - ref.coef_.ravel())) <= 1e-6 / min(lam, 1.0)


def test_newton_with_intercept_matches_sklearn():
    x, y = _data(seed=3)
    n = len(y)
    w = newton_logistic(x, y, 1.0 / n, intercept=True)
    ref = LogisticRegression(C=1.0, tol=1e-12, max_iter=10_000).fit(x, y)
    np.testing.assert_allclose(w[:-1], ref.coef_.ravel(), atol=1e-5)
    assert abs(w[-1] - ref.intercept_[0]) <= 1e-5
