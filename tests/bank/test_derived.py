"""PriDe and CalibraEval: label-free, fitted on non-test rows, frozen as plain JSON, swap-exact.\nFloat comparisons here are exact (==) where the invariant is exact; pride's recovery of a planted\nprior is float64 arithmetic over 300 rows: tolerance 300 * 8 * eps64."""
import json

import numpy as np
import pytest

from baer_fast.io.records import Signals
from baer_fast.protocols import calibraeval, pride
from baer_fast.protocols.base import snap
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
    tol = 300 * 8 * np.finfo(np.float64).eps       # a mean over 300 rows of a few float64 operations each
    assert params["prior"][0] == pytest.approx(1 / (1 + np.exp(-1.0)), abs=tol)
    out = np.array([pride.apply(params, r) for r in rows])
    assert np.allclose(out[:, 0], q, atol=tol, rtol=0) and np.allclose(out[:, 1], q, atol=tol, rtol=0)


def _calibra_rows(n, token_bias, seed=0):
    """CalibraEval's raw runs [u_ab, u_ba, u_ab/x, u_ba/x] of a judge with true log-odds z for a
    and a planted selection bias: `token_bias` log-odds added to the token A, wherever it is."""
    rng = np.random.default_rng(seed)
    z = rng.normal(0.0, 1.5, n)
    sig = lambda x: 1 / (1 + np.exp(-x))    # noqa: E731
    pa = {"ab": sig(z + token_bias), "ba": sig(-z + token_bias), "ab/x": sig(-z + token_bias),
          "ba/x": sig(z + token_bias)}     # P(token A): A is a in ab and ba/x, b in ba and ab/x
    rows = [[snap(float(x)) for x in r] for r in zip(pa["ab"], 1 - pa["ba"], 1 - pa["ab/x"], pa["ba/x"])]
    return rows, z


def _selection_bias(params, rows) -> float:
    """mean g(p1) + g(p3) - 1 over a's triplets: 0 for a judge without selection bias."""
    g = (lambda p: p) if params is None else (lambda p: calibraeval.g(params, p))    # noqa: E731
    return float(np.mean([g(t[0]) + g(t[2]) - 1 for t in (calibraeval.triplets(r)[0] for r in rows)]))


def assert_informative(params, rows, z):
    """The calibrated runs still order the pairs by their planted quality: a map collapsed to 1/2
    (zero selection bias, zero information) fails here."""
    out = np.array([calibraeval.apply(params, r) for r in rows])
    assert out.std() > 0.25
    assert np.mean((out.mean(axis=1) > 0.5) == (z > 0)) > 0.9


def test_calibraeval_removes_a_planted_selection_bias():
    rows, z = _calibra_rows(300, 1.0, seed=1)
    params = calibraeval.fit(rows)
    json.dumps(params)
    v = np.array(params["values"])
    assert np.all(np.diff(v) >= 0) and 0 <= v[0] <= v[-1] <= 1
    assert params["objective"] < params["objective_identity"]        # the published objective went down
    assert abs(_selection_bias(None, rows)) > 0.3                      # planted
    assert abs(_selection_bias(params, rows)) < 0.05                   # removed
    assert_informative(params, rows, z)


def test_a_map_collapsed_to_one_half_is_rejected():
    rows, z = _calibra_rows(100, 1.0, seed=2)
    params = calibraeval.fit(rows)
    collapsed = dict(params, values=[0.5] * len(params["values"]))
    from tests.fixtures.tolerances import fp64_tol
    assert abs(_selection_bias(collapsed, rows)) <= fp64_tol(8 * len(rows))   # "unbiased", and useless
    with pytest.raises(AssertionError):
        assert_informative(collapsed, rows, z)


def test_calibraeval_reads_three_prompts_and_its_swap_closure():
    from baer_fast.protocols import direct
    ps = {p.key: p for p in calibraeval.prompts("q", "a-text", "b-text")}
    assert [ps["ab"], ps["ba"]] == direct.prompts("q", "a-text", "b-text")      # p1, p3: shared with direct
    assert ps["ba/x"].user.index("Response B:\nb-text") < ps["ba/x"].user.index("Response A:\na-text")  # p2
    swapped = {p.key: p for p in calibraeval.prompts("q", "b-text", "a-text")}
    assert {p.user for p in ps.values()} == {p.user for p in swapped.values()}


def test_calibraeval_fit_and_runs_are_exact_under_swap_and_row_order():
    from baer_fast.io.records import swap_runs
    rows, _ = _calibra_rows(80, 0.7, seed=3)
    params = calibraeval.fit(rows)
    flipped = [swap_runs(r) if i % 2 else r for i, r in enumerate(rows)][::-1]
    assert calibraeval.fit(flipped) == params                         # bit for bit
    for r in rows[:20]:
        out = apply_derived({"calibraeval": r}, ["calibraeval"], {"calibraeval": params})["calibraeval"]
        mirrored = apply_derived({"calibraeval": swap_runs(r)}, ["calibraeval"], {"calibraeval": params})
        assert mirrored["calibraeval"] == swap_runs(out)


def test_fit_never_reads_test_rows():
    rows, _ = _biased_rows(30, 0.7, seed=3)
    raw = _calibra_rows(30, 0.7, seed=3)[0]
    recs = [Signals(f"p{i}", {"direct": r, "calibraeval": c}, split="test" if i % 2 else "selection")
            for i, (r, c) in enumerate(zip(rows, raw))]
    base = fit_derived([(s, s.experts) for s in recs], ["pride", "calibraeval"])
    poisoned = [Signals(s.id, {"direct": [0.999, 0.001], "calibraeval": [0.999, 0.001, 0.999, 0.001]}
                        if s.split == "test" else s.experts, split=s.split) for s in recs]
    assert fit_derived([(s, s.experts) for s in poisoned], ["pride", "calibraeval"]) == base
    assert base["pride"]["n_fit"] == 15
    assert apply_derived({"direct": [None, 0.4]}, ["pride"], base)["pride"][0] is None
