"""Nested, noise-aware choices of the budget search and the cascade's tau: cases that must fail safe."""
from __future__ import annotations

import logging
import random

import numpy as np
import pytest

from baer_fast.io.records import Signals
from baer_fast.io.splits import SplitSpec, roles
from baer_fast.selection.budget import (CostModel, SubsetCV, batched_oof, choose, newton_odd_logistic, paired_gap,
                                        plan_budget)
from baer_fast.selection.cascade import CascadeSpec, choose_tau, fit_cascade

from tests.selection.cost_synth import assert_same_saved, bank, blank_test_labels
from tests.selection.test_cascade import _stack_art


def flip_test_labels(records, spec):
    flip = {"a": "b", "b": "a"}
    return [Signals(r.id, r.experts, r.subset, flip[r.label] if role == "test" else r.label, r.split, r.meta)
            for r, role in zip(records, roles(records, spec))]


# --- tau ------------------------------------------------------------------------------------------------

def test_tau_is_inf_when_the_most_confident_pair_already_costs_accuracy():
    y = np.array([1.0, 1.0, -1.0, -1.0])
    s1 = np.array([[-5.0, 2.5, -2.4, -2.3]])        # the most confident stage-1 call is wrong, the full stack right
    s2 = np.array([[1.0, 1.0, -1.0, -1.0]])
    got = choose_tau(s1, s2, y, tolerance=0.0)
    assert got["tau"] == np.inf and got["cv_exit_rate"] == 0.0
    assert got["cv_accuracy"] == got["full_cv_accuracy"] == 1.0
    # even a generous tolerance does not help: one loss in four pairs plus its noise is -0.5
    assert choose_tau(s1, s2, y, tolerance=0.4)["tau"] == np.inf


def test_tau_never_goes_below_the_confidence_floor_nor_exits_without_evidence():
    y = np.array([1.0, -1.0, 1.0, -1.0])
    s1 = np.array([[3.0, -1.0, 0.0, -0.5]])          # all right (0 reads as a), and no full-stack disagreement
    s2 = np.array([[1.0, -1.0, 1.0, -1.0]])
    assert choose_tau(s1, s2, y, min_confidence=np.log(3))["tau"] == 3.0
    assert choose_tau(s1, s2, y, min_confidence=0.5)["tau"] == 0.5
    free = choose_tau(s1, s2, y, min_confidence=0.0)
    assert free["tau"] == 0.5 and free["cv_exit_rate"] == 0.75          # s1 = 0 stays with the full head
    assert choose_tau(np.zeros((1, 4)), s2, y, min_confidence=0.0)["tau"] == np.inf


def test_tau_counts_wins_as_noise_never_as_gain():
    y = np.ones(8)
    s1 = np.array([[9.0, 8.0, 7.0, -6.0, 5.0, 4.0, 3.0, 2.0]])    # stage 1 right except at |s1| = 6
    s2 = np.array([[-1.0, -1.0, -1.0, 1.0, 1.0, 1.0, 1.0, 1.0]])  # full stack wrong on the three most confident
    got = choose_tau(s1, s2, y, tolerance=0.2)
    # at 8: min(2, 0) / 8 - sqrt(2) / 8 = -0.177 passes; at 7: -sqrt(3) / 8 = -0.217 stops, although stage 1
    # is 3 pairs ahead there (crediting the wins, (3 - 0) / 8 - sqrt(3) / 8 would pass and so would 6 and below)
    assert got["tau"] == 8.0 and (got["wins"], got["losses"]) == (2.0, 0.0)
    assert got["bound"] == pytest.approx(-np.sqrt(2) / 8)
    assert got["cv_accuracy"] == pytest.approx(got["full_cv_accuracy"] + 2 / 8)     # the figure itself is not capped


def test_tau_stops_at_the_first_failure_and_never_skips_ahead():
    y = np.ones(6)
    s1 = np.array([[6.0, -5.0, 4.0, 3.0, 2.0, 1.5]])     # a loss at 5, then agreement all the way down
    s2 = np.ones((1, 6))
    got = choose_tau(s1, s2, y, tolerance=0.0)
    assert got["tau"] == 6.0 and got["losses"] == 0.0
    lenient = choose_tau(s1, s2, y, tolerance=0.5)         # -1/6 - 1/6 = -1/3 >= -0.5: everything exits
    assert lenient["tau"] == 1.5 and lenient["bound"] == pytest.approx(-1 / 3)


def test_tau_averages_repeats_on_the_same_rows():
    y = np.ones(4)
    s1 = np.array([[5.0, 4.0, 3.0, 2.0], [5.0, 4.0, 3.0, -2.0]])     # repeat 2 loses the least confident pair
    s2 = np.ones((2, 4))
    got = choose_tau(s1, s2, y, tolerance=0.0)
    assert got["tau"] == 3.0 and got["cv_exit_rate"] == 0.75


# --- subset choice --------------------------------------------------------------------------------------

def _visit(name, cost, acc, loss, gap, se):
    return {"experts": [name], "cost": cost, "cv_accuracy": acc, "cv_logloss": loss, "cv_gap": gap,
            "cv_gap_se": se, "found_by": "forward"}


def test_a_subset_far_below_the_full_head_is_rejected_for_one_within_noise():
    far = _visit("far", 1.0, 0.80, 0.40, -0.10, 0.02)      # best log-loss, but 10 points below +- 2
    near = _visit("near", 1.0, 0.79, 0.45, -0.005, 0.01)
    assert choose([far, near], limit=1.0)["experts"] == ["near"]
    assert choose([far], limit=1.0)["experts"] == ["far"]            # none near: the best, flagged by the plan
    assert not choose([far, near], limit=1.0, model=CostModel(tolerance=0.2)) is near   # both near: log-loss


def _noise_cheap_bank(n=150, seed=0):
    """Cheap experts are coin flips, the expensive ones are good: no subset at 1/3 is near the full stack."""
    return bank(n, seed=seed, accuracy={"cheap": 0.5, "noise": 0.5, "good": 0.9, "better": 0.92},
                cost={"cheap": 100, "noise": 100, "good": 800, "better": 900})


def test_plan_reports_honestly_when_no_subset_is_near(caplog):
    with caplog.at_level(logging.WARNING, logger="baer_fast"):
        plan = plan_budget(_noise_cheap_bank(), "0.2")
    assert set(plan["experts"]) <= {"cheap", "noise"}
    assert plan["near_full"] is False and plan["nested"]["near_full"] is False
    assert plan["nested"]["gap"] + plan["noise_z"] * plan["nested"]["se"] < -plan["tolerance"]
    assert sum(plan["nested"]["chosen_in_folds"].values()) == 5 * CostModel().outer_repeats
    assert "no subset within the budget was shown to be within noise of the full stack" in caplog.text
    assert "not within noise of the full stack by nested CV" in caplog.text


def test_the_warning_names_the_verdict_that_failed(caplog):
    from baer_fast.selection.budget import warn_if_far
    plan = {"budget": "0.33", "tolerance": 0.01, "near_full": True, "cv_gap": 0.0, "cv_gap_se": 0.0,
            "nested": {"near_full": False, "gap": -0.035, "se": 0.025}}
    with caplog.at_level(logging.WARNING, logger="baer_fast"):
        warn_if_far(plan)
    assert "by nested CV" in caplog.text and "gap -3.5 +- 2.5 points, tolerance 1.0" in caplog.text
    assert "no subset within the budget" not in caplog.text        # the search folds found a near one
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="baer_fast"):
        warn_if_far({**plan, "nested": {**plan["nested"], "near_full": True}})
        warn_if_far({**plan, "nested": None})
    assert caplog.text == ""


def test_nested_figures_are_out_of_fold_and_paired():
    from baer_fast.selection.budget import labelled_rows
    records = bank(120, seed=3)
    plan, rows = plan_budget(records, "0.5"), labelled_rows(records, SplitSpec())[0]
    n = plan["nested"]
    assert n["repeats"] == CostModel().outer_repeats and n["folds"] == 5
    assert n["gap"] == pytest.approx((n["wins"] - n["losses"]) / len(rows))
    assert n["cv_accuracy"] - n["full_cv_accuracy"] == pytest.approx(n["gap"])


def test_paired_gap_is_mcnemar():
    y = np.array([1.0, 1.0, 1.0, -1.0])
    g = paired_gap(np.array([[1.0, -1.0, 1.0, 1.0]]), np.array([[1.0, 1.0, -1.0, -1.0]]), y)
    assert (g["wins"], g["losses"]) == (1.0, 2.0)
    assert g["gap"] == pytest.approx(-0.25) and g["se"] == pytest.approx(np.sqrt(3) / 4)


def test_batched_oof_matches_one_fit_per_fold():
    recs = bank(90, seed=8)
    y = np.array([1.0 if r.label == "a" else -1.0 for r in recs])
    experts = sorted(recs[0].experts)
    cv = SubsetCV(recs, y, experts, ["default"], lam=0.01)
    for sub in (experts, experts[:2], experts[3:4]):
        phi = cv.phi(sub)
        one = np.stack([cv.oof_scores(sub, f) for f in cv.folds])
        both = batched_oof(phi, y, np.stack(cv.folds), 0.01)
        # both Newton solves stop once every coordinate moves < 1e-10 (quadratic convergence: the error left
        # is below that step), so the weights agree to 2e-10 and a score to 2e-10 * sum_d |phi_d / rms_d|
        rms = np.sqrt(np.mean(phi ** 2, axis=0))
        bound = 2e-10 * np.abs(phi / np.where(rms > 0, rms, 1.0)).sum(axis=1) * 2
        assert np.all(np.abs(one - both) <= bound[None, :] + 1e-12)
    w = newton_odd_logistic(cv.phi(experts) / np.sqrt(np.mean(cv.phi(experts) ** 2, axis=0)), y, 0.01)
    assert np.all(np.isfinite(w))


# --- leak-free and order-free ---------------------------------------------------------------------------

@pytest.mark.parametrize("change", [blank_test_labels, flip_test_labels])
def test_cascade_artifact_ignores_test_labels(tmp_path, change):
    spec, records = SplitSpec(), bank(100, seed=11)
    a = fit_cascade(records, _stack_art(records), cascade=CascadeSpec("0.2"))
    changed = change(records, spec)
    b = fit_cascade(changed, _stack_art(changed), cascade=CascadeSpec("0.2"))
    assert_same_saved(tmp_path, a, b)


def test_budget_artifact_ignores_flipped_test_labels(tmp_path):
    from baer_fast.selection.budget import fit_budget
    spec, records = SplitSpec(), bank(100, seed=12)
    a = fit_budget(records, "0.5", condition="c", spec=spec)
    b = fit_budget(flip_test_labels(records, spec), "0.5", condition="c", spec=spec)
    assert_same_saved(tmp_path, a, b)
    assert a["budget"]["nested"] is not None


def test_budget_plan_is_identical_under_row_order():
    records = bank(100, seed=14)
    shuffled = list(records)
    random.Random(9).shuffle(shuffled)
    assert plan_budget(shuffled, "0.33") == plan_budget(records, "0.33")      # nested figures included


def test_cascade_is_deterministic_under_row_order(tmp_path):
    records = bank(100, seed=13)
    shuffled = list(records)
    random.Random(3).shuffle(shuffled)
    a = fit_cascade(records, _stack_art(records), cascade=CascadeSpec("0.2"))
    b = fit_cascade(shuffled, _stack_art(shuffled), cascade=CascadeSpec("0.2"))
    assert_same_saved(tmp_path, a, b)
    assert a["cascade"]["cv"]["bound"] >= -a["cascade"]["tolerance"] - 1e-12


def test_the_cascade_cheap_stage_does_not_warn_as_if_deployed_alone(caplog):
    """`fit --cascade` plans its cheap stage with the budget search. That stage never decides alone (tau holds
    its exits to the full head), so the search's "expect it to cost accuracy" warning, which the same plan
    raises under `fit --budget`, would mislead there, and would name a budget the user never gave."""
    records = _noise_cheap_bank()
    with caplog.at_level(logging.WARNING, logger="baer_fast"):
        plan_budget(records, "0.2")
    assert "expect it to cost accuracy" in caplog.text        # the same plan, deployed alone, does warn
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="baer_fast"):
        art = fit_cascade(records, _stack_art(records), cascade=CascadeSpec("0.2"))
    assert "cascade" in art
    assert "within noise of the full stack" not in caplog.text and "tokens=" not in caplog.text
