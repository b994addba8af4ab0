"""The standard-error head-choice rule (one-SE and the deployed two-SE bar) on constructed fold accuracies."""
from __future__ import annotations

import numpy as np

from baer_fast.selection.rule import BAR, one_se_choice, paired_gain, se_choice

ORDER = ("constant", "stack", "route")


def test_paired_gain_and_its_standard_error_by_hand():
    c = np.array([[0.8, 0.7, 0.9, 0.8, 0.6]])
    s = np.array([[0.7, 0.7, 0.7, 0.8, 0.6]])
    gain, se = paired_gain(c, s)
    d = np.array([0.1, 0.0, 0.2, 0.0, 0.0])
    assert np.isclose(gain, d.mean())
    assert np.isclose(se, d.std(ddof=1) / np.sqrt(5))


def test_repeats_average_the_variance_and_do_not_shrink_it():
    d1 = np.array([0.1, -0.1, 0.2, 0.0, 0.0])
    one = paired_gain(d1[None], np.zeros((1, 5)))[1]
    three = paired_gain(np.stack([d1] * 3), np.zeros((3, 5)))[1]
    assert np.isclose(one, three)


def test_simpler_head_kept_unless_the_gain_beats_its_noise():
    base = np.full((2, 5), 0.7)
    noisy = base + np.array([[0.1, -0.08, 0.12, -0.1, 0.0]] * 2)      # mean +0.008, SE ~0.045
    steady = base + 0.02                                              # +0.02 on every fold, SE 0
    assert one_se_choice({"constant": base, "stack": noisy}, ORDER)[0] == "constant"
    assert one_se_choice({"constant": base, "stack": steady}, ORDER)[0] == "stack"
    assert one_se_choice({"constant": base, "stack": base}, ORDER)[0] == "constant"     # a tie keeps the simpler


def test_route_is_compared_with_the_current_choice():
    base = np.full((1, 5), 0.7)
    choice, steps = one_se_choice({"constant": base, "stack": base + 0.05, "route": base + 0.06}, ORDER)
    assert choice == "route"                       # +0.01 over the stack on every fold: SE 0, it advances
    assert steps[1]["against"] == "stack" and steps[1]["advanced"]
    choice, steps = one_se_choice({"constant": base, "stack": base + 0.05, "route": base + 0.05}, ORDER)
    assert choice == "stack" and not steps[1]["advanced"]


def test_the_deployed_bar_asks_for_two_standard_errors():
    base = np.full((1, 5), 0.7)
    d = np.array([[0.10, 0.0, 0.05, 0.0, 0.05]])              # mean 0.04, SE 0.0187: 2.1 SE
    gain, se = paired_gain(base + d, base)
    assert BAR == 2.0 and BAR * se < gain
    assert se_choice({"mean": base, "stack": base + d}, ("mean", "stack"))[0] == "stack"
    half = np.array([[0.10, -0.02, 0.05, 0.0, 0.02]])         # mean 0.03, SE 0.0215: 1.4 SE
    gain, se = paired_gain(base + half, base)
    assert se < gain <= BAR * se
    choice, steps = se_choice({"mean": base, "stack": base + half}, ("mean", "stack"))
    assert choice == "mean" and steps[0]["bar"] == BAR and not steps[0]["advanced"]
    assert one_se_choice({"mean": base, "stack": base + half}, ("mean", "stack"))[0] == "stack"
