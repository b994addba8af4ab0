"""benchmarks/baseline_bias.py: the hindsight protocol is the one best on all labelled rows, and its gain
against the test-chosen maximum is never positive (0 where it is that maximum)."""
import numpy as np
import pytest

from tests.fixtures.checks import import_bench
from tests.selection.cost_synth import ACCURACY, bank


@pytest.fixture(scope="module")
def bb():
    return import_bench("baseline_bias")


def test_a_perfect_protocol_is_the_hindsight_one_and_wins_every_cell(bb):
    robustness = import_bench("robustness")
    c = robustness.prepare(bank(120, seed=1, accuracy={**ACCURACY, "pricey": 1.0}))
    cells = bb.cells_of(c, "synth", 0, 6)
    assert {x["hindsight"] for x in cells} == {"pricey"}
    assert bb.figures(cells) == {"cells": 6, "win_rate": 1.0, "mean_gain": 0.0, "worst_gain": 0.0}


def test_gains_are_never_positive_and_some_cells_are_lost(bb):
    robustness = import_bench("robustness")
    close = {"cheap": 0.80, "mid": 0.79, "pricey": 0.81, "huge": 0.80, "noise": 0.55}
    cells = bb.cells_of(robustness.prepare(bank(120, seed=2, accuracy=close)), "synth", 0, 20)
    g = np.array([x["gain"] for x in cells])
    assert np.all(g <= 0) and np.any(g < 0)      # exact: 100 (a - max) with a among the maximised; protocols close
    f = bb.figures(cells)
    assert f["cells"] == 20 and f["worst_gain"] == g.min() and f["win_rate"] == np.mean(g == 0)
