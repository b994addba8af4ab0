from collections import Counter

from baer_fast.io.splits import SplitSpec, role, roles

from tests.fixtures.data import make_signals


def test_roles_are_deterministic_and_near_the_stated_shares():
    ids = [f"id-{i}" for i in range(20_000)]
    a = [role(i) for i in ids]
    assert a == [role(i) for i in ids]
    share = {k: v / len(ids) for k, v in Counter(a).items()}
    assert abs(share["selection"] - 0.2) < 0.02
    assert abs(share["calibration"] - 0.4) < 0.02
    assert abs(share["test"] - 0.4) < 0.02


def test_explicit_split_field_wins():
    assert role("anything", "test") == "test"
    assert role("anything", "selection") == "selection"


def test_role_depends_on_id_and_seed_only():
    rows = make_signals(50)
    base = roles(rows)
    assert roles(list(reversed(rows))) == list(reversed(base))
    assert roles(rows, SplitSpec(seed="other")) != base
