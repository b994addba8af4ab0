"""Mean, vote and shrunk stacks: odd under the swap (hypothesis), the shrunk fit's objective and limit, the
vote's weights and their limits, round trip."""
from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st

from baer_fast import artifact
from baer_fast.features.evidence import EPS
from baer_fast.heads import head_class
from baer_fast.heads.logistic import TOL
from baer_fast.heads.stack import (MEAN_SCALE_LAMBDA, VOTE_PRIOR, StackHead, cv_shrunk_lambda, expert_accuracy,
                                   fit_odd_logistic, fit_shrunk_weights, mean_direction,
                                   mean_weights, training_rms, vote_weights)
from baer_fast.io.records import Signals
from baer_fast.selection.fit import fit_condition

from .synth import SUBSETS, specialist_signals

EXPERTS = ["c", "g1", "g2", "m"]
EPS64 = np.finfo(np.float64).eps
MAX_RUNS = 6
_HEADS = {}


def fitted(kind: str) -> StackHead:
    """The mean / vote / shrunk head of one synthetic condition, fitted once."""
    if kind not in _HEADS:
        art = fit_condition(specialist_signals(200, seed=1), condition="t", head=kind)
        _HEADS[kind] = head_class(kind).from_json(art["heads"][kind])
    return _HEADS[kind]


def swap_bound(head: StackHead, rec) -> float:
    """Bound on |s(x) + s(Tx)| from the computation, not from one machine.

    Each phi entry negates to within B = ((2 / EPS)(M + 2) + 16 * 7) eps64: the swapped runs
    1 - u and their mean are rounded ((M + 2) eps64 on p), the clipped logit's slope is at
    most 2 / EPS, and |z| <= logit(1 - EPS) < 7 takes a few relative roundings (logs, the
    1 + 4 delta division). The dot product over D entries adds D roundings of sum |w phi / r|.
    """
    b = ((2.0 / EPS) * (MAX_RUNS + 2) + 16 * 7) * EPS64
    a = np.abs(head.weights / head.rms)
    phi = head.features([rec])[0]
    return float(b * a.sum() + len(a) * EPS64 * np.sum(a * np.abs(phi)))


prob = st.one_of(st.none(), st.floats(0.0, 1.0), st.sampled_from([0.0, 0.5, 1.0, 0.25, 0.75, 1e-9]))
runs = st.lists(prob, min_size=1, max_size=MAX_RUNS)
signals = st.builds(lambda ex, subset: Signals("x", ex, subset=subset),
                    st.dictionaries(st.sampled_from(EXPERTS + ["extra"]), runs, min_size=0, max_size=5),
                    st.sampled_from(list(SUBSETS) + ["unseen"]))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(signals, st.sampled_from(["mean", "vote", "shrunk"]))
def test_swap_negates_the_score(rec, kind):
    head = fitted(kind)
    s, sw = head.score([rec])[0], head.score([rec.swapped()])[0]
    assert abs(s + sw) <= swap_bound(head, rec)


def test_mean_is_the_equal_weight_mean_of_scaled_zt():
    phi = fitted("mean").features(specialist_signals(120, seed=4))
    rms, w = mean_weights(phi, len(EXPERTS))          # takes no labels: nothing to leak
    zt = phi[:, 1:2 * len(EXPERTS):2]
    terms = zt / rms[1:2 * len(EXPERTS):2]
    # two orders of summing K terms: each rounds at most K times, relative to the sum of |terms|
    bound = 4 * len(EXPERTS) * EPS64 * np.abs(terms).mean(axis=1)
    assert np.all(np.abs((phi / rms) @ w - terms.mean(axis=1)) <= bound)
    assert np.all(w[0::2][:len(EXPERTS)] == 0) and np.all(w[2 * len(EXPERTS):] == 0)


def _xy(seed=0, n=160, d=6):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d))
    y = np.where(x @ np.linspace(1.0, -0.5, d) + rng.normal(size=n) > 0, 1.0, -1.0)
    return x, y


def test_shrunk_fit_minimises_the_ridge_toward_the_scaled_mean():
    x, y = _xy()
    k, lam = 3, 0.05              # columns 1, 3, 5 play the zt role
    rms, w = fit_shrunk_weights(x, y, lam, k)
    xs = x / rms
    e = mean_direction(k, x.shape[1])
    c = fit_odd_logistic((xs @ e)[:, None], y, MEAN_SCALE_LAMBDA)[0]
    sig = 1.0 / (1.0 + np.exp(y * (xs @ w)))
    grad = -(xs * (y * sig)[:, None]).mean(axis=0) + lam * (w - c * e)
    # Newton stops once the max-norm of this gradient is below TOL (heads/logistic.py)
    assert np.max(np.abs(grad)) <= 10 * TOL


def test_a_strong_pull_returns_the_scaled_mean():
    x, y = _xy(seed=1)
    k, lam = 3, 1e6
    rms, w = fit_shrunk_weights(x, y, lam, k)
    xs = x / rms
    e = mean_direction(k, x.shape[1])
    c = fit_odd_logistic((xs @ e)[:, None], y, MEAN_SCALE_LAMBDA)[0]
    # first-order condition: lam (w - c e) = -grad L(w), and |grad L|_inf <= max_d mean_i |x_id|
    assert np.max(np.abs(w - c * e)) <= np.max(np.mean(np.abs(xs), axis=0)) / lam


def test_a_numerically_zero_column_is_left_unscaled_and_cannot_break_the_swap():
    """An expert whose runs are all 1/2 to 1e-11 (CalibraEval on a tiny random judge) gives a phi column of
    rounding: dividing it by its RMS would turn a 1-ulp error of the mirrored record into 1e-5."""
    from baer_fast.heads.stack import RMS_FLOOR
    x, y = _xy(seed=7, n=50)
    x[:, 0] *= 1e-11                      # pure rounding scale
    x[:, 2] *= 1e-5                       # small but above the floor: still evidence, still scaled
    r = training_rms(x)
    assert r[0] == 1.0 and RMS_FLOOR == 1e-6
    # the same formula column by column: a mean of n squares rounds within n eps, its root within half that
    np.testing.assert_allclose(r[1:], np.sqrt(np.mean(x[:, 1:] ** 2, axis=0)), rtol=len(x) * np.finfo(float).eps)
    rms, w = fit_shrunk_weights(x, y, 0.01, 3)
    head = StackHead(["a", "b", "c"], [], rms, w, 0.01)
    mirror = -x
    mirror[:, 0] += 1.1e-16               # the one-ulp error a swap leaves in logit(1 - u) near u = 1/2
    s, t = head.score_features(x), head.score_features(mirror)
    from tests.fixtures.tolerances import HEAD_OPS, fp64_tol
    assert np.max(np.abs(s + t)) <= fp64_tol(HEAD_OPS, 1 + float(np.max(np.abs(s))))
    assert np.all(training_rms(np.zeros((4, 3))) == 1.0)


def test_bagged_shrunk_is_the_mean_of_the_shrunk_fits_on_each_complement():
    """Solved independently (scipy's BFGS on the written objective, features scaled by the RMS of ALL rows):
    each part's complement gives one shrunk fit, and the deployed weights are their mean."""
    from scipy.optimize import minimize
    x, y = _xy(seed=5, n=120)
    k, lam = 3, 0.1
    parts = np.arange(len(y)) % 5
    rms, w = fit_shrunk_weights(x, y, lam, k, parts)
    np.testing.assert_array_equal(rms, training_rms(x))
    xs, e, fits, gaps = x / rms, mean_direction(k, x.shape[1]), [], []
    for f in range(5):
        xf, yf = xs[parts != f], y[parts != f]
        c = fit_odd_logistic((xf @ e)[:, None], yf, MEAN_SCALE_LAMBDA)[0]

        def obj(v):
            m = yf * (xf @ v)
            return np.mean(np.logaddexp(0.0, -m)) + 0.5 * lam * np.sum((v - c * e) ** 2)

        def grad(v):
            return -(xf * (yf / (1.0 + np.exp(yf * (xf @ v))))[:, None]).mean(axis=0) + lam * (v - c * e)
        v = minimize(obj, c * e, jac=grad, method="BFGS", options={"gtol": 1e-10}).x
        fits.append(v)
        # the objective is lam-strongly convex, so |v - v*| <= |grad(v)| / lam for either solver: BFGS's
        # gradient as reached, Newton's below TOL in every coordinate (heads/logistic.py)
        gaps.append((np.linalg.norm(grad(v)) + np.sqrt(len(v)) * TOL) / lam)
    np.testing.assert_allclose(w, np.mean(fits, axis=0), rtol=0, atol=max(gaps))
    _, plain = fit_shrunk_weights(x, y, lam, k)
    assert np.max(np.abs(w - plain)) > 1e-4       # subagging is not the plain fit in disguise


def test_bagged_shrunk_with_one_part_is_the_plain_fit():
    x, y = _xy(seed=6, n=40)
    rms, w = fit_shrunk_weights(x, y, 0.1, 3, np.zeros(len(y), np.int64))
    rms0, w0 = fit_shrunk_weights(x, y, 0.1, 3)
    np.testing.assert_array_equal(rms, rms0)
    np.testing.assert_array_equal(w, w0)


def test_the_deployed_shrunk_head_is_subagged_over_the_id_hashed_parts():
    from baer_fast.selection.budget import labelled_rows
    from baer_fast.selection.nested import BAG_PARTS, bag_parts
    from baer_fast.io.splits import SplitSpec
    rows = specialist_signals(200, seed=1)
    art = fit_condition(rows, condition="t", head="shrunk")
    head = head_class("shrunk").from_json(art["heads"]["shrunk"])
    rep = art["fit_report"]["shrunk"]
    assert rep["bagged"]["parts"] == BAG_PARTS == 5
    train, _, y = labelled_rows(rows, SplitSpec())
    phi = head.features(train)
    rms, w = fit_shrunk_weights(phi, y, rep["lambda"], len(head.experts), bag_parts([r.id for r in train]))
    np.testing.assert_array_equal(head.weights, w)            # the same fit on the same rows: the same bits
    np.testing.assert_array_equal(head.rms, rms)


def test_shrunk_lambda_choice_is_deterministic_and_by_log_loss():
    x, y = _xy(seed=2)
    folds = np.arange(len(y)) % 3
    lam, table = cv_shrunk_lambda(x, y, folds, 3)
    assert (lam, table) == cv_shrunk_lambda(x, y, folds, 3)
    assert lam == min(table, key=lambda r: (round(r["cv_logloss"], 12), -r["lambda"]))["lambda"]


def test_artifact_round_trip_keeps_kind_and_scores(tmp_path):
    rows = specialist_signals(150, seed=9)
    for kind in ("mean", "vote", "shrunk"):
        art = fit_condition(rows, condition="rt", head=kind)
        path = tmp_path / f"{kind}.json"
        artifact.save(str(path), art)
        loaded = artifact.load(str(path))            # JSON only: never unpickles
        head = artifact.deployed_head(loaded)
        assert isinstance(head, StackHead) and head.kind == kind and loaded["heads"][kind]["kind"] == kind
        np.testing.assert_array_equal(head.score(rows), head_class(kind).from_json(art["heads"][kind]).score(rows))


def _votes(accs, n=400, seed=0, k_extra=2):
    """phi-like [n, 2K + k_extra] whose zt columns (1, 3, ...) are right with the given frequencies, and y."""
    rng = np.random.default_rng(seed)
    y = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    k = len(accs)
    x = np.zeros((n, 2 * k + k_extra))
    for j, a in enumerate(accs):
        right = np.arange(n) < round(a * n)             # exactly round(a n) right, shuffled
        rng.shuffle(right)
        conf = rng.uniform(0.2, 3.0, n)
        x[:, 1 + 2 * j] = np.where(right, y, -y) * conf
        x[:, 2 * j] = 2.0 * x[:, 1 + 2 * j]
    x[:, 2 * k:] = rng.normal(size=(n, k_extra))
    return x, y


def test_vote_weights_are_the_clipped_normalised_log_odds_of_smoothed_accuracy():
    x, y = _votes([0.9, 0.75, 0.6, 0.5, 0.3])
    rms, w = vote_weights(x, y, 5)
    n = len(y)
    acc = (np.array([360, 300, 240, 200, 120]) + VOTE_PRIOR) / (n + 2 * VOTE_PRIOR)
    np.testing.assert_allclose(expert_accuracy(x, y, 5), acc, rtol=0, atol=1e-15)
    lo = np.maximum(np.log(acc / (1 - acc)), 0.0)
    np.testing.assert_allclose(w[1:10:2], lo / lo.sum(), rtol=1e-12, atol=1e-15)
    assert w[7] == 0.0 and w[9] == 0.0                  # a coin and a worse-than-coin expert get nothing
    assert np.all(w[0::2][:5] == 0) and np.all(w[10:] == 0)     # only zt columns carry weight
    assert w[1] > w[3] > w[5] > 0 and abs(w.sum() - 1.0) <= 1e-12
    np.testing.assert_array_equal(rms, np.sqrt(np.mean(x ** 2, axis=0)))


def test_a_perfect_expert_gets_a_finite_weight_and_all_coins_fall_back_to_the_mean():
    x, y = _votes([1.0, 0.8])
    _, w = vote_weights(x, y, 2)
    assert np.all(np.isfinite(w)) and w[1] > w[3] > 0
    x, y = _votes([0.5, 0.4, 0.2])
    _, w = vote_weights(x, y, 3)
    np.testing.assert_array_equal(w, mean_direction(3, x.shape[1]))


def test_vote_ties_follow_eq1_an_undecided_expert_counts_as_voting_a():
    y = np.array([1.0, 1.0, 1.0, -1.0])
    x = np.zeros((4, 2))                                # zt = 0 everywhere: Eq. 1 predicts a, right 3 times
    assert expert_accuracy(x, y, 1)[0] == (3 + VOTE_PRIOR) / (4 + 2 * VOTE_PRIOR)
