"""The fair baseline: pool, both readings, strongest, oracle, McNemar (worked table) and the sign-flip test."""
from __future__ import annotations

import numpy as np
import pytest

from baer_fast.eval.metrics import (evaluate, format_table, head_native_credit, head_predictions, mcnemar_exact, sign_flip_exact,
                                   strongest)
from baer_fast.heads.single import ConstantHead, baseline_pool, native_credit, strict_correct
from baer_fast.io.records import Signals


def test_mcnemar_exact_against_a_worked_table():
    # discordant cells b = 9 (x right, y wrong) and c = 2: p = 2 * sum_{k<=2} C(11,k) / 2^11 = 2 * 67 / 2048
    x = np.array([True] * 9 + [False] * 2 + [True] * 20 + [False] * 5)
    y = np.array([False] * 9 + [True] * 2 + [True] * 20 + [False] * 5)
    m = mcnemar_exact(x, y)
    assert (m["x_only"], m["y_only"]) == (9, 2)
    assert m["p_value"] == pytest.approx(2 * (1 + 11 + 55) / 2 ** 11, rel=1e-12)


def test_sign_flip_equals_mcnemar_on_zero_one_credit():
    rng = np.random.default_rng(0)
    for _ in range(5):
        x, y = rng.random(60) < 0.7, rng.random(60) < 0.6
        assert sign_flip_exact(x.astype(float), y.astype(float))["p_value"] == pytest.approx(
            mcnemar_exact(x, y)["p_value"], rel=1e-10)


def test_sign_flip_with_half_credit_by_enumeration():
    x = np.array([1.0, 1.0, 1.0, 0.0, 1.0])
    y = np.array([0.5, 0.0, 0.5, 0.0, 1.0])         # d = .5, 1, .5, 0, 0 -> observed sum 2
    out = sign_flip_exact(x, y, scale=2)
    sums = [a * 0.5 + b * 1.0 + c * 0.5 for a in (-1, 1) for b in (-1, 1) for c in (-1, 1)]
    assert out["p_value"] == pytest.approx(np.mean(np.abs(sums) >= 2.0 - 1e-12))
    with pytest.raises(ValueError):
        sign_flip_exact(np.array([1.0]), np.array([0.3]), scale=2)


def test_strongest_breaks_ties_by_name_order():
    c = np.array([[1, 1, 0], [0, 1, 1], [1, 0, 1]], bool)
    assert strongest(c, ["a", "b", "c"]) == ("a", pytest.approx(2 / 3))


def test_baseline_pool_default_internal_and_override():
    ex = ["cot", "deliberate", "pointwise", "pride", "reference", "direct"]
    assert baseline_pool(ex) == ["cot", "direct", "pride"]
    assert baseline_pool(ex, internal=["pride"]) == ["cot", "direct"]
    assert baseline_pool(ex, baselines=["reference", "cot"]) == ["cot", "reference"]
    with pytest.raises(ValueError, match="nope"):
        baseline_pool(ex, baselines=["nope"])


def _rec(i, runs: dict, label="a"):
    return Signals(f"p{i}", runs, label=label)


def test_readings_on_constructed_runs():
    recs = [_rec(0, {"k": [0.8, 0.2]}),            # orders disagree: strict undecided -> 0, native 1/2
            _rec(1, {"k": [0.9, 0.8]}),            # both right
            _rec(2, {"k": [0.1, None]}, "a"),      # one wrong run, one missing
            _rec(3, {"k": [0.5, 0.5]}, "b"),       # both undecided
            _rec(4, {}, "b")]                      # expert absent
    y = np.array([1, 1, 1, -1, -1])
    np.testing.assert_array_equal(strict_correct(recs, ["k"], y)[:, 0], [False, True, False, False, False])
    np.testing.assert_allclose(native_credit(recs, ["k"], y)[:, 0], [0.5, 1.0, 0.0, 0.0, 0.0])


def test_evaluate_uses_the_pool_and_the_stronger_reading():
    # "ext" disagrees across orders on half the pairs (strict 50%, native 75%); "reference" is perfect
    # but internal; "weak" is strict 60%. The head is the constant head on "weak".
    recs = []
    for i in range(20):
        lab = "a" if i % 2 else "b"
        right, wrong = (0.9, 0.1) if lab == "a" else (0.1, 0.9)
        ext = [right, wrong] if i < 10 else [right, right]
        weak = [right, right] if i < 12 else [wrong, wrong]
        recs.append(_rec(i, {"ext": ext, "weak": weak, "reference": [right, right]}, lab))
    scores = ConstantHead("weak").score(recs)
    rep = evaluate(recs, scores, ["test"] * 20)
    assert rep["baseline_pool"] == ["ext", "weak"]
    assert rep["experts"]["ext"]["accuracy_strict"] == pytest.approx(0.5)
    assert rep["experts"]["ext"]["accuracy_native"] == pytest.approx(0.75)
    assert not rep["experts"]["reference"]["baseline"]
    best = rep["strongest_baseline"]
    assert (best["expert"], best["reading"], best["accuracy"]) == ("ext", "native", pytest.approx(0.75))
    assert rep["accuracy"] == pytest.approx(0.6)
    # the oracle ranges over the pool only: per pair the best credit of "ext" / "weak" under either reading
    per_pair = [1.0 if (i >= 10 or i < 12) else 0.5 for i in range(20)]
    assert rep["oracle_any_expert"] == pytest.approx(np.mean(per_pair))
    assert rep["oracle_any_expert"] >= best["accuracy"]
    forced = evaluate(recs, scores, ["test"] * 20, baselines=["reference"])
    assert forced["strongest_baseline"]["expert"] == "reference" and forced["oracle_any_expert"] == 1.0


def test_head_native_credit_is_eq1_averaged_over_both_display_orders():
    # constructed: s > 0 right, s = 0 (either label) half, s < 0 wrong
    np.testing.assert_allclose(head_native_credit(np.array([1.0, 0.0, -2.0, 0.0]), np.array([1, 1, 1, -1])),
                               [1.0, 0.5, 0.0, 0.5])
    # property: shown swapped, a head scores -s and the label's sign flips; the reading is the mean of
    # Eq. 1's credit over the two presentations, whatever the scores and labels
    rng = np.random.default_rng(3)
    for _ in range(20):
        s = rng.choice([-1.5, -0.2, 0.0, 0.0, 0.7], size=40)
        y = rng.choice([-1, 1], size=40)
        both = ((head_predictions(s) == y).astype(float) + (head_predictions(-s) == -y).astype(float)) / 2
        np.testing.assert_array_equal(head_native_credit(s, y), both)


def test_evaluate_reports_the_heads_order_averaged_reading():
    # the constant head on an expert that disagrees with itself across orders on 4 of 10 pairs scores
    # exactly 0 there: Eq. 1 says "a" (right on the 3 a-labelled ones), the order-averaged reading 1/2
    recs = []
    for i in range(10):
        lab = "a" if i % 2 else "b"
        right, wrong = (0.9, 0.1) if lab == "a" else (0.1, 0.9)
        recs.append(_rec(i, {"k": [right, wrong] if i in (0, 1, 3, 5) else [right, right]}, lab))
    scores = ConstantHead("k").score(recs)
    rep = evaluate(recs, scores, ["test"] * 10)
    assert rep["n_score_ties"] == 4
    assert "4 pairs scored exactly 0" in format_table(rep)
    assert "scored exactly 0" not in format_table(evaluate(recs[6:], scores[6:], ["test"] * 4))
    assert rep["accuracy"] == pytest.approx(0.9)                   # 6 decided right + 3 ties labelled a
    assert rep["accuracy_native"] == pytest.approx(0.8)            # 6 right + 4 halves
    assert rep["accuracy_native"] == pytest.approx(rep["experts"]["k"]["accuracy_native"])
    swapped = evaluate([_rec(r.id, {"k": [1 - u for u in r.experts["k"]][::-1]}, "b" if r.label == "a" else "a")
                        for r in recs], -scores, ["test"] * 10)
    assert swapped["accuracy_native"] == pytest.approx(rep["accuracy_native"])
    assert swapped["accuracy"] == pytest.approx(0.7)               # Eq. 1 moves with the display order


def test_an_expert_left_out_by_baselines_is_not_called_internal():
    # --baselines picks the pool; the protocols it leaves out are external ones, not BAER's own
    recs = [_rec(i, {"ext": [0.9, 0.9], "other": [0.1, 0.1], "reference": [0.9, 0.9]}) for i in range(4)]
    scores = ConstantHead("ext").score(recs)
    table = format_table(evaluate(recs, scores, ["test"] * 4, baselines=["ext"]))
    assert "other (internal)" not in table and "other (not in --baselines)" in table
    assert "reference (not in --baselines)" in table
    assert "reference (internal)" in format_table(evaluate(recs, scores, ["test"] * 4))


def test_format_table_keeps_columns_aligned_for_long_expert_names():
    # JudgeBench's experts are named like 'reward_model:<hub path>': longer than the 44-wide column
    long = "reward_model:Skywork/Skywork-Reward-Llama-3.1-8B-v0.2-extra-long"
    recs = [_rec(i, {long: [0.9, 0.8], "k": [0.2, 0.3]}, "a" if i % 2 else "b") for i in range(6)]
    table = format_table(evaluate(recs, ConstantHead("k").score(recs), ["test"] * 6))
    rows = [ln for ln in table.splitlines() if ln.strip().split(" ")[0] in ("BAER", "k", long)]
    assert len(rows) == 3 and len({len(r.rstrip()) for r in rows}) == 1, table
