import numpy as np
import pytest

from baer_fast.heads.stack import LAMBDAS, cv_lambda, fit_odd_logistic

from tests.fixtures.data import make_signals


@pytest.mark.parametrize("lam", LAMBDAS)
def test_weights_minimise_the_papers_objective(lam):
    """Gradient of mean_{D+-} log(1+exp(-t w.v)) + lam/2 |w|^2 vanishes at the fit (C mapping)."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(120, 5))
    y = np.where(x @ np.array([1.0, -0.5, 0, 0, 0.2]) + rng.normal(size=120) > 0, 1.0, -1.0)
    w = fit_odd_logistic(x, y, lam)
    xa, ya = np.concatenate([x, -x]), np.concatenate([y, -y])
    margin = ya * (xa @ w)
    grad = -(xa * (ya / (1 + np.exp(margin)))[:, None]).mean(0) + lam * w
    assert np.max(np.abs(grad)) < 1e-6


def test_lambda_choice_is_deterministic_and_from_the_grid():
    rows = make_signals(200, seed=5)
    from baer_fast.heads.stack import StackHead
    head = StackHead(["e1", "e2", "e3", "e4"], ["chat", "math"], np.ones(1), np.zeros(1), 0.0)
    phi = head.features(rows)
    y = np.array([1.0 if r.label == "a" else -1.0 for r in rows])
    folds = np.arange(len(y)) % 3
    a = cv_lambda(phi, y, folds)
    b = cv_lambda(phi, y, folds)
    assert a == b and a[0] in LAMBDAS and len(a[1]) == len(LAMBDAS)


def test_stack_learns_the_informative_expert():
    from baer_fast.selection.fit import fit_condition
    rows = make_signals(400, seed=2)
    art = fit_condition(rows, condition="synthetic")
    w = dict(zip(art["heads"]["stack"]["feature_names"], art["heads"]["stack"]["weights"]))
    assert abs(w["z[e1]"]) + abs(w["zt[e1]"]) > abs(w["z[e4]"]) + abs(w["zt[e4]"])
