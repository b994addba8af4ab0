"""Gate decisions on constructed correctness vectors."""
from __future__ import annotations

import numpy as np

from baer_fast.selection.gates import decide, reference_gate

ROLES = ["selection"] * 10 + ["calibration"] * 20


def correct(sel_right: int, cal_right: int) -> np.ndarray:
    return np.array([True] * sel_right + [False] * (10 - sel_right) + [True] * cal_right + [False] * (20 - cal_right))


def test_reference_gate_needs_both_margins_positive():
    base = np.stack([correct(7, 14), correct(6, 12)], axis=1)   # first column is the strongest
    both = reference_gate(correct(8, 15), base, ["x", "y"], ROLES)
    assert both["passed"] and both["baseline"] == "x"
    only_sel = reference_gate(correct(9, 13), base, ["x", "y"], ROLES)
    only_cal = reference_gate(correct(6, 18), base, ["x", "y"], ROLES)
    tie_sel = reference_gate(correct(7, 18), base, ["x", "y"], ROLES)
    assert not only_sel["passed"] and not only_cal["passed"] and not tie_sel["passed"]
    assert only_sel["selection_margin"] > 0 > only_sel["calibration_margin"]


def test_baseline_is_chosen_on_all_dev_rows_not_per_split():
    # y is better on selection, x on calibration and overall: x is the baseline on both gates.
    base = np.stack([correct(5, 18), correct(9, 10)], axis=1)
    g = reference_gate(correct(6, 19), base, ["x", "y"], ROLES)
    assert g["baseline"] == "x" and g["passed"]


def test_reference_gate_reads_fractional_credit_and_names_the_reading():
    base = np.stack([correct(7, 14).astype(float), np.full(30, 0.5)], axis=1)
    g = reference_gate(correct(8, 15), base, ["x", "y"], ROLES, readings=["strict", "native"])
    assert g["baseline"] == "x" and g["baseline_reading"] == "strict" and g["passed"]


def test_decide_prefers_reference_then_the_rule():
    rule_route = {"choice": "route", "steps": [{"candidate": "route", "against": "constant", "gain": 0.05,
                                                "se": 0.01, "advanced": True}]}
    rule_const = {"choice": "constant", "steps": []}
    f_pass = {"passed": True, "baseline": "x", "selection_margin": 0.1, "calibration_margin": 0.05}
    f_fail = {"passed": False, "baseline": "x", "selection_margin": 0.1, "calibration_margin": -0.05}
    assert decide(rule_route, f_pass)[0] == "reference"
    assert decide(rule_route, f_fail)[0] == "route"
    assert decide(rule_const, f_fail)[0] == "constant"
    assert decide(rule_const, None)[0] == "constant"
    assert decide(rule_route, f_pass, "stack") == ("stack", "forced by --head stack")
