"""The length tie-break: only exact ties change, exactly antisymmetric, fitted on training rows only."""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from baer_fast import artifact
from baer_fast.heads.stack import StackHead
from baer_fast.heads.tiebreak import TieBreakHead, describe, fit_tiebreak, length_sign
from baer_fast.io.records import Signals
from baer_fast.scoring import score_records
from baer_fast.selection.fit import fit_condition

from tests.heads.synth import specialist_signals

EXPERTS = ["e1", "e2"]


def _rec(i, runs: dict, la, lb, label=None) -> Signals:
    return Signals(f"p{i}", runs, label=label, meta={"len_a": la, "len_b": lb})


def _stack() -> StackHead:
    """A fixed odd stack over two experts (phi = z1, zt1, z2, zt2, zbar * 1[subset=default])."""
    return StackHead(EXPERTS, ["default"], np.ones(5), np.array([0.7, 0.3, -0.5, 0.2, 0.1]), lam=1.0)


def test_fit_counts_length_wins_and_applies_only_beyond_one_standard_error():
    y = np.array([1.0] * 7 + [-1.0] * 3 + [1.0, -1.0])
    rows = [_rec(i, {}, 200, 100) for i in range(10)] + [_rec(10, {}, 50, 50), _rec(11, {}, None, 9)]
    tb = fit_tiebreak(rows, y)                    # the longer (a) wins 7 of 10; equal / unknown lengths are not counted
    assert (tb["right"], tb["wrong"]) == (7, 3)
    assert tb["z"] == pytest.approx(4 / math.sqrt(10)) and tb["applied"]
    assert tb["weight"] == pytest.approx(math.log(8 / 4))          # logit((7 + 1) / (10 + 2))
    assert "longer response" in describe(tb)
    flipped = fit_tiebreak(rows, -y)              # the shorter one wins: a negative weight
    assert flipped["weight"] == pytest.approx(-math.log(2)) and "shorter response" in describe(flipped)
    even = fit_tiebreak(rows[:10], np.array([1.0] * 6 + [-1.0] * 4))     # z = 2 / sqrt(10) < 1: not applied
    assert not even["applied"] and even["weight"] == 0.0 and "exact ties stay 0" in describe(even)


def test_length_sign_reads_meta_and_treats_missing_as_unknown():
    recs = [_rec(0, {}, 10, 3), _rec(1, {}, 3, 10), _rec(2, {}, 4, 4), Signals("x", {}, meta={})]
    assert length_sign(recs).tolist() == [1.0, -1.0, 0.0, 0.0]


def test_only_exact_ties_change_and_they_go_to_the_longer_response():
    inner = _stack()
    recs = [_rec(0, {"e1": [1.0, 0.0], "e2": [0.0, 1.0]}, 300, 100),     # every expert contradicts itself: a tie
            _rec(1, {"e1": [1.0, 0.0], "e2": [0.0, 1.0]}, 100, 300),
            _rec(2, {"e1": [1.0, 0.0], "e2": [0.0, 1.0]}, 100, 100),     # a tie of equal lengths stays 0
            _rec(3, {"e1": [0.9, 0.8], "e2": [0.7, 0.6]}, 100, 300)]     # evidence: untouched
    s0 = inner.score(recs)
    assert s0[0] == s0[1] == s0[2] == 0.0 and s0[3] != 0
    s = TieBreakHead(inner, 0.4).score(recs)
    assert s.tolist() == [0.4, -0.4, 0.0, s0[3]]
    rows = score_records({"head": "shrunk", "condition": "c"}, recs + [r.swapped() for r in recs],
                         TieBreakHead(inner, 0.4))
    assert [r["winner"] for r in rows[:2]] == ["a", "b"] and [r["winner"] for r in rows[4:6]] == ["b", "a"]


prob = st.one_of(st.none(), st.floats(0.0, 1.0), st.sampled_from([0.0, 0.5, 1.0, 0.3, 0.7]))
pair_runs = st.tuples(prob, prob).map(list)
records = st.lists(st.builds(lambda i, e, la, lb: _rec(i, e, la, lb), st.integers(0, 99),
                             st.fixed_dictionaries({"e1": pair_runs, "e2": pair_runs}),
                             st.integers(0, 50), st.integers(0, 50)), min_size=1, max_size=12)


@settings(max_examples=150, deadline=None)
@given(records, st.floats(-3, 3))
def test_tie_broken_scores_negate_exactly_under_the_swap(recs, weight):
    head = TieBreakHead(_stack(), weight)
    s = head.score(recs)
    s_sw = head.score([r.swapped() for r in recs])
    assert np.all(np.abs(s + s_sw) <= 1e-9)
    assert np.array_equal(np.abs(s), np.abs(s_sw)) or np.allclose(np.abs(s), np.abs(s_sw), rtol=0, atol=1e-9)


def test_fit_stores_it_from_training_rows_and_deploys_it(tmp_path):
    rows = specialist_signals(300, seed=4)
    # labels the longer response wins 80% of the time; pairs where m and c both abstain are ties
    rng = np.random.default_rng(0)
    recs = []
    for r in rows:
        longer = "a" if r.meta["len_a"] > r.meta["len_b"] else "b"
        label = longer if rng.random() < 0.8 else {"a": "b", "b": "a"}[longer]
        ex = {k: v for k, v in r.experts.items()} if rng.random() < 0.6 else {k: [1.0, 0.0] for k in r.experts}
        recs.append(replace(r, label=label, experts=ex))
    art = fit_condition(recs, condition="c")
    tb = art["tiebreak"]
    assert tb["applied"] and tb["weight"] > 0 and tb["right"] > tb["wrong"]
    artifact.save(str(tmp_path / "h.json"), art)
    head = artifact.deployed_head(artifact.load(str(tmp_path / "h.json")))
    assert isinstance(head, TieBreakHead) and head.weight == tb["weight"]
    tie = [r for r in recs if all(v == [1.0, 0.0] for v in r.experts.values()) and r.meta["len_a"] != r.meta["len_b"]]
    assert np.all(head.score(tie) == tb["weight"] * length_sign(tie))
    off = fit_condition(recs, condition="c", tiebreak=False)
    assert off["tiebreak"] is None and not isinstance(artifact.deployed_head(off), TieBreakHead)


def test_test_labels_cannot_move_it_but_training_labels_do():
    from baer_fast.io.splits import SplitSpec, roles
    rows = specialist_signals(240, seed=6)
    rl = roles(rows, SplitSpec())
    flip = {"a": "b", "b": "a"}
    test_flipped = [replace(r, label=flip[r.label]) if role == "test" else r for r, role in zip(rows, rl)]
    train_flipped = [replace(r, label=flip[r.label]) if role != "test" else r for r, role in zip(rows, rl)]
    base = fit_condition(rows, condition="c")["tiebreak"]
    assert fit_condition(test_flipped, condition="c")["tiebreak"] == base
    moved = fit_condition(train_flipped, condition="c")["tiebreak"]
    assert (moved["right"], moved["wrong"]) == (base["wrong"], base["right"])


def test_a_tie_that_rounding_leaves_at_1e_16_in_one_orientation_is_broken_in_both():
    """An inner head whose evidence cancels exactly one way round and to 3.7e-16 the other (runs that were
    not snapped, so u -> 1 - u rounds): an exact `s == 0` test would break the tie in one orientation only
    and lose antisymmetry by |w|."""
    rec = _rec(0, {}, 300, 100)

    class Inner:
        def score(self, records):
            return np.array([0.0 if r.meta["len_a"] == 300 else -3.7e-16 for r in records])

    head = TieBreakHead(Inner(), 0.4)
    assert head.score([rec])[0] == 0.4 and head.score([rec.swapped()])[0] == -0.4


def test_the_wrapper_keeps_the_inner_heads_other_methods():
    from baer_fast.heads.cascade import CascadeHead
    recs = [_rec(0, {"e1": [0.9, 0.8], "e2": [0.7, 0.6]}, 100, 300), _rec(1, {"e1": [1.0, 0.0], "e2": [0.0, 1.0]}, 3, 1)]
    cascade = CascadeHead(_stack(), _stack(), tau=0.5)
    head = TieBreakHead(cascade, 0.4)
    assert head.exits(recs).tolist() == cascade.exits(recs).tolist() == [True, False]
    assert not hasattr(TieBreakHead(_stack(), 0.4), "chosen_experts")      # scoring.py: expert = null
    assert head.score(recs)[1] == 0.4
