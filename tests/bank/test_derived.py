"""PriDe and CalibraEval: label-free, fitted on non-test rows, frozen as plain JSON, swap-exact."""
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from baer_fast.io.records import Signals
from baer_fast.protocols import calibraeval, pride
from baer_fast.bank.runner import apply_derived, fit_derived


def _biased_rows(n, first_bias, seed=0):
    """Direct runs of a judge whose true P(a) is q but who adds `first_bias` log-odds to position 1."""
    rng = np.random.default_rng(seed)
    q = rng.uniform(0.05, 0.95, n)
    lo = np.log(q / (1 - q))
    sig = lambda x: 1 / (1 + np.exp(-x))    # noqa: E731
    p_ab_first = sig(lo + first_bias)        # a shown first
    p_ba_first = sig(-lo + first_bias)       # b shown first
    return [[float(x), float(1 - y)] for x, y in zip(p_ab_first, p_ba_first)], q


def test_pride_recovers_a_planted_position_prior():
    rows, q = _biased_rows(300, 1.0)
    params = pride.fit(rows)
    json.dumps(params)
    assert params["prior"][0] == pytest.approx(1 / (1 + np.exp(-1.0)), abs=1e-9)
    out = np.array([pride.apply(params, r) for r in rows])
    assert np.allclose(out[:, 0], q, atol=1e-9) and np.allclose(out[:, 1], q, atol=1e-9)


def test_calibraeval_is_monotone_and_reduces_order_disagreement():
    rows, _ = _biased_rows(200, 0.8, seed=1)
    params = calibraeval.fit(rows)
    json.dumps(params)
    assert np.all(np.diff(params["values"]) >= 0) and 0 <= params["values"][0] <= params["values"][-1] <= 1
    before = np.mean([abs(a - b) for a, b in rows])
    after = np.mean([abs(a - b) for a, b in (calibraeval.apply(params, r) for r in rows)])
    assert after < 0.5 * before


_ROWS = _biased_rows(50, 0.5, seed=2)[0]


@settings(max_examples=50, deadline=None)
@given(st.floats(0.001, 0.999), st.floats(0.001, 0.999))
def test_derived_runs_mirror_under_swap(u_ab, u_ba):
    for mod in (pride, calibraeval):
        params = mod.fit(_ROWS)
        runs = mod.apply(params, [u_ab, u_ba])
        swapped = mod.apply(params, [1 - u_ba, 1 - u_ab])     # direct runs of the swapped pair
        assert swapped[0] == pytest.approx(1 - runs[1], abs=1e-12)
        assert swapped[1] == pytest.approx(1 - runs[0], abs=1e-12)


def test_fit_never_reads_test_rows():
    rows, _ = _biased_rows(30, 0.7, seed=3)
    recs = [Signals(f"p{i}", {"direct": r}, split="test" if i % 2 else "selection") for i, r in enumerate(rows)]
    base = fit_derived([(s, s.experts) for s in recs], ["pride", "calibraeval"])
    poisoned = [Signals(s.id, {"direct": [0.999, 0.001]} if s.split == "test" else s.experts, split=s.split)
                for s in recs]
    assert fit_derived([(s, s.experts) for s in poisoned], ["pride", "calibraeval"]) == base
    assert base["pride"]["n_fit"] == 15
    assert apply_derived({"direct": [None, 0.4]}, ["pride"], base)["pride"][0] is None
