"""benchmarks/prior_study.py: the cross-backbone prior never reads a label it is scored against."""
import numpy as np
import pytest

from tests.heads.synth import labels, specialist_signals

EXPERTS = ["c", "g1", "g2", "m"]


@pytest.fixture(scope="module")
def ps():
    from tests.fixtures.checks import import_bench
    return import_bench("prior_study")


@pytest.fixture(scope="module")
def banks():
    """Two backbones' banks on the same 80 pair ids (the target's and another's)."""
    return specialist_signals(80, seed=1), specialist_signals(80, seed=2)


def member(ps, other, target, flip=()):
    y = np.asarray(labels(other))
    y[list(flip)] *= -1
    return ps.Member(other, y, target, EXPERTS)


def test_held_out_rows_never_see_their_labels(ps, banks):
    """Flipping the other backbone's labels of the held-out ids leaves every cross-fitted score unchanged
    (they are excluded from every fit), while flipping a training id's label does change scores."""
    target, other = banks
    ids = [r.id for r in target]
    tr, held = np.arange(60), np.arange(60, 80)
    base = ps.crossfit(member(ps, other, target), ids, tr, held)
    np.testing.assert_array_equal(ps.crossfit(member(ps, other, target, flip=held), ids, tr, held), base)
    assert not np.array_equal(ps.crossfit(member(ps, other, target, flip=tr[:10]), ids, tr, held), base)


def test_a_training_row_is_scored_without_its_own_label(ps, banks):
    """Cross-fitting: flipping the other backbone's label of training id j leaves the score of row j
    itself unchanged (j's part is left out of the fit that scores it)."""
    target, other = banks
    ids = [r.id for r in target]
    tr, held = np.arange(60), np.arange(60, 80)
    base = ps.crossfit(member(ps, other, target), ids, tr, held)
    for j in (0, 17, 42):
        flipped = ps.crossfit(member(ps, other, target, flip=[j]), ids, tr, held)
        assert flipped[j] == base[j]
        assert not np.array_equal(flipped, base)
