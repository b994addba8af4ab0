"""benchmarks/budget_cascade_study.py: its exit level spends the budget it is given, the split at the
level is the same for a pair and its swap, and the cascade it fits reads no test label."""
import numpy as np
import pytest

from tests.fixtures.checks import import_bench
from tests.selection.cost_synth import bank


@pytest.fixture(scope="module")
def bc():
    return import_bench("budget_cascade_study")


def test_exit_level_is_the_largest_level_that_exits_enough(bc):
    conf = np.array([3.0, 3.0, 2.0, 2.0, 2.0, 2.0, 1.0, 1.0, 0.5, 0.0])
    tau, share = bc.exit_level(conf, 0.4)           # 4 of 10 must exit: both 3s and 2 of the four 2s
    assert tau == 2.0 and share == pytest.approx(0.5)
    tau, share = bc.exit_level(conf, 0.6)           # all six at >= 2: the whole level
    assert tau == 2.0 and share == pytest.approx(1.0)
    assert bc.exit_level(conf, 0.0) == (float("inf"), 0.0)


def test_exits_meet_the_need_on_average_and_never_at_zero(bc):
    rng = np.random.default_rng(0)
    conf = rng.choice([0.0, 0.7, 1.4, 2.1], size=4000, p=[0.1, 0.3, 0.4, 0.2])
    ids = [f"p{i}" for i in range(len(conf))]
    for need in (0.3, 0.5, 0.75):
        tau, share = bc.exit_level(conf, need)
        ex = bc.exits(conf, ids, tau, share)
        assert abs(ex.mean() - need) < 0.03          # the hash splits the level at `share` (binomial noise)
    tau, share = bc.exit_level(conf, 0.95)           # more than the pairs with evidence: zeros stay
    ex = bc.exits(conf, ids, tau, share)
    assert not ex[conf == 0].any() and ex[conf > 0].all()
    held = bc.exits(conf, ids, tau, share, zeros=True)   # the budget-holding variant lets some zeros go
    assert held[conf > 0].all() and abs(held.mean() - 0.95) < 0.03


def test_the_split_depends_on_the_id_only(bc):
    """A pair and its swap keep the id, so they exit together; a different id may not."""
    from baer_fast.heads.cascade import strength
    recs = bank(60, seed=2)
    u = bc.uniform([r.id for r in recs])
    assert np.array_equal(u, bc.uniform([r.swapped().id for r in recs]))
    assert len(np.unique(u)) == len(recs) and np.all((u >= 0) & (u < 1))
    s = np.linspace(-2, 2, len(recs))
    assert np.array_equal(bc.exits(strength(s), [r.id for r in recs], 1.0, 0.5),
                          bc.exits(strength(-s), [r.swapped().id for r in recs], 1.0, 0.5))


def test_cell_reads_no_test_label(bc):
    """Flipping the test labels turns each test accuracy into 1 - itself and changes nothing else."""
    from baer_fast.io.records import Signals
    from baer_fast.io.splits import SplitSpec, roles
    records, spec = bank(160, seed=5), SplitSpec(seed="budget-cascade-test")
    flip = {"a": "b", "b": "a"}
    flipped = [Signals(r.id, r.experts, r.subset, flip[r.label] if role == "test" else r.label, r.split, r.meta)
               for r, role in zip(records, roles(records, spec))]
    a, b = bc.cell(records, spec, 0.5, "synth"), bc.cell(flipped, spec, 0.5, "synth")
    assert a["options"] and all(a[f"chosen_{v}"] == b[f"chosen_{v}"] for v in bc.VARIANTS)
    tol = 2 * np.finfo(float).eps          # k/n + (n - k)/n: the credits sum exactly, each mean rounds once
    assert a["full"] + b["full"] == pytest.approx(1.0, abs=tol)
    for oa, ob in zip(a["options"], b["options"], strict=True):
        for v in bc.VARIANTS:
            assert oa[v]["test"] + ob[v]["test"] == pytest.approx(1.0, abs=tol)
            oa[v].pop("test"), ob[v].pop("test")
        assert oa == ob
