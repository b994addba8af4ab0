"""benchmarks/prune_distill.py: its soft-target fit is the stack's objective, and its "label" student is the stack."""
import numpy as np
import pytest

from tests.fixtures.checks import import_bench
from tests.selection.cost_synth import bank


@pytest.fixture(scope="module")
def pd():
    return import_bench("prune_distill")


def test_soft_targets_of_zero_and_one_give_the_stacks_own_fit(pd):
    from baer_fast.heads.stack import fit_odd_logistic
    rng = np.random.default_rng(3)
    x = rng.normal(size=(80, 5))
    y = np.where(x @ np.array([1.0, -0.5, 0.0, 0.3, 0.8]) + rng.normal(size=80) > 0, 1.0, -1.0)
    for lam in (1.0, 0.01):
        # both stop with every gradient coordinate below 1e-10 on a lam-strongly convex objective:
        # each is within sqrt(D) 1e-10 / lam of the minimiser
        abs_tol = 2 * np.sqrt(x.shape[1]) * 1e-10 / lam
        assert pd.soft_logistic(x, (y > 0).astype(float), lam) == pytest.approx(fit_odd_logistic(x, y, lam), abs=abs_tol)


def test_soft_targets_move_the_fit_toward_the_teacher(pd):
    """Half-way targets on every row: the gradient at w = 0 is exactly 0 (sigma(0) = 1/2), so the fit
    stays at 0; a hard-label fit in disguise would not."""
    rng = np.random.default_rng(4)
    x = rng.normal(size=(60, 3))
    np.testing.assert_array_equal(pd.soft_logistic(x, np.full(60, 0.5), 0.01), np.zeros(3))


def test_cell_reads_no_test_label_to_fit(pd):
    """Flipping the test labels turns each student's test accuracy into 1 - itself (a tie scores 1/2
    either way), so the fitted scores are the same: only the scoring reads the test labels."""
    from baer_fast.io.records import Signals
    from baer_fast.io.splits import SplitSpec, roles
    records, spec = bank(160, seed=5), SplitSpec(seed="distill-test")
    flip = {"a": "b", "b": "a"}
    flipped = [Signals(r.id, r.experts, r.subset, flip[r.label] if role == "test" else r.label, r.split, r.meta)
               for r, role in zip(records, roles(records, spec))]
    a, b = pd.cell(records, spec, 0.5), pd.cell(flipped, spec, 0.5)
    assert a["experts"] == b["experts"]
    for mode in pd.MODES + ("full",):
        assert a[mode] + b[mode] == pytest.approx(1.0, abs=2 * np.finfo(float).eps)   # k/n + (n - k)/n, each rounded
