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


def test_a_split_group_never_straddles_roles():
    """Pairs sharing meta.split_group (RewardBench 2's pairs of one prompt) take one role, hashed
    from the group; records without a group keep the role of their id."""
    from baer_fast.io.records import Signals

    recs = [Signals(f"p{g}-c0-r{k}", {"e": [0.5, 0.5]}, meta={"split_group": f"p{g}"})
            for g in range(300) for k in range(3)]
    got = roles(recs)
    by_group = {}
    for r, x in zip(recs, got):
        by_group.setdefault(r.meta["split_group"], set()).add(x)
    assert all(len(v) == 1 for v in by_group.values())
    assert set(Counter(next(iter(v)) for v in by_group.values())) == {"selection", "calibration", "test"}
    # without the group the same ids scatter: the grouping is what keeps them together
    plain = roles([Signals(r.id, r.experts) for r in recs])
    assert any(len({plain[3 * g + k] for k in range(3)}) > 1 for g in range(300))
    assert roles(make_signals(50)) == [role(r.id) for r in make_signals(50)]


def test_an_integer_split_group_groups_like_its_digits():
    """A user's integer prompt id in meta.split_group groups its pairs (it used to fall back to the id)."""
    from baer_fast.io.records import signals_from_json
    from baer_fast.io.splits import split_key
    a = signals_from_json({"id": "x1", "experts": {"e": [0.5]}, "meta": {"split_group": 7}})
    b = signals_from_json({"id": "x2", "experts": {"e": [0.5]}, "meta": {"split_group": "7"}})
    assert split_key(a) == split_key(b) == "group:7"
