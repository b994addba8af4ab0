"""fit_condition on synthetic conditions: which head the gates deploy, what the artifact records."""
from __future__ import annotations

import json

import numpy as np
import pytest

from baer_fast import artifact
from baer_fast.cli import main
from baer_fast.errors import InputError
from baer_fast.io.records import Signals, write_signals
from baer_fast.scoring import score_records
from baer_fast.selection.fit import fit_condition
from baer_fast.selection.rule import BAR

from tests.heads.synth import _runs, specialist_signals

N = 220


def _role(i: int) -> str:
    return ("selection", "calibration", "calibration", "test", "test")[i % 5]


def reference_expert(acc_by_role: dict):
    """An extra expert whose accuracy depends on the split role of the pair."""
    return lambda rng, sign, role: _runs(rng, sign, acc_by_role.get(role, acc_by_role["test"]), 0.45)


def test_deployed_head_is_the_rules_choice_and_every_candidate_is_recorded():
    art = fit_condition(specialist_signals(N, seed=3), condition="spec")
    sel = art["selection"]
    rule = sel["gates"]["rule"]
    assert art["head"] == rule["choice"], sel["reason"]
    assert {"mean", "vote", "shrunk", "stack", "constant", "route"} <= set(sel["candidates"]) <= set(art["heads"])
    for name in ("mean", "vote", "shrunk", "stack", "constant", "route"):
        c = sel["candidates"][name]
        assert np.asarray(c["fold_accuracy"]).shape == (sel["nested_cv"]["repeats"], sel["nested_cv"]["folds"])
        assert np.isclose(c["oof_accuracy"], np.mean(c["fold_accuracy"]))
    # the steps replay the rule from the recorded fold accuracies
    current = rule["order"][0]
    for st in rule["steps"]:
        assert st["against"] == current
        if st["advanced"]:
            current = st["candidate"]
    assert current == rule["choice"]


def test_the_shrunk_stack_is_left_only_for_a_gain_above_bar_times_the_noise():
    strong = reference_expert({"selection": 0.95, "calibration": 0.95, "test": 0.95})
    rows = specialist_signals(N, seed=5, extra={"s": strong})
    art = fit_condition(rows, condition="one")
    rule = art["selection"]["gates"]["rule"]
    assert rule["order"] == ["shrunk", "stack", "constant", "route"] and rule["bar"] == BAR
    assert art["heads"]["constant"]["expert"] == "s"
    moved = [x for x in rule["steps"] if x["advanced"]]
    assert all(x["gain"] > BAR * x["se"] and x["bar"] == BAR for x in moved)
    assert all(x["gain"] <= BAR * x["se"] for x in rule["steps"] if not x["advanced"])
    assert (art["head"] == "shrunk") == (not moved)


def test_reference_deployed_only_when_both_gates_pass():
    good = {"selection": 0.99, "calibration": 0.99, "test": 0.99}
    only_sel = {"selection": 0.99, "calibration": 0.3, "test": 0.99}
    only_cal = {"selection": 0.3, "calibration": 0.99, "test": 0.99}
    for acc, want in ((good, "reference"), (only_sel, None), (only_cal, None)):
        rows = specialist_signals(N, seed=6, split=_role, extra={"reference": reference_expert(acc)})
        art = fit_condition(rows, condition="ref")
        g = art["selection"]["gates"]["reference"]
        assert art["reference_expert"] == "reference"
        assert "reference" not in art["heads"]["stack"]["experts"]
        assert "reference" not in art["heads"]["route"]["experts"]
        if want:
            assert art["head"] == "reference" and g["passed"]
        else:
            assert art["head"] != "reference" and not g["passed"]
            assert (g["selection_margin"] > 0) != (g["calibration_margin"] > 0)


def test_pointwise_expert_is_a_routing_candidate_only():
    pw = reference_expert({"selection": 0.7, "calibration": 0.7, "test": 0.7})
    rows = specialist_signals(120, seed=7, extra={"pw": pw})
    art = fit_condition(rows, condition="pw", pointwise_expert="pw")
    assert art["pointwise_expert"] == "pw"
    assert "pw" not in art["heads"]["stack"]["experts"]
    assert "pw" in art["heads"]["route"]["experts"]


def test_forced_heads_and_unknown_experts():
    rows = specialist_signals(120, seed=8)
    art = fit_condition(rows, condition="f", head="stack")
    assert art["head"] == "stack" and art["forced"] and art["selection"]["reason"].startswith("forced")
    auto = fit_condition(rows, condition="f")
    assert auto["heads"] == art["heads"] and not auto["forced"]     # forcing changes only the choice
    with pytest.raises(InputError, match="reference"):
        fit_condition(rows, condition="f", head="reference")
    with pytest.raises(InputError, match="not an expert"):
        fit_condition(rows, condition="f", pointwise_expert="nope")


def test_blank_test_labels_and_refit_give_identical_artifacts():
    rows = specialist_signals(150, seed=10, split=_role,
                              extra={"reference": reference_expert({"selection": 0.8, "calibration": 0.8,
                                                                    "test": 0.8})})
    blank = [Signals(r.id, r.experts, r.subset, None if r.split == "test" else r.label, r.split, r.meta)
             for r in rows]
    a1 = fit_condition(rows, condition="d")
    a2 = fit_condition(blank, condition="d")
    a3 = fit_condition(rows, condition="d")
    assert artifact.checksum(a1) == artifact.checksum(a2) == artifact.checksum(a3)


def test_cli_fit_prints_selection_and_forced_route_scores_with_expert(tmp_path, capsys):
    verify = reference_expert({"selection": 0.9, "calibration": 0.9, "test": 0.9})
    rows = specialist_signals(150, seed=11, extra={"verify": verify})
    sig = tmp_path / "s.jsonl"
    write_signals(str(sig), rows)
    out = tmp_path / "h.json"
    assert main(["fit", "--signals", str(sig), "--condition", "c", "--out", str(out), "--head", "route",
                 "--reference-expert", "verify"]) == 0
    text = capsys.readouterr().out
    assert "selection: route (forced)" in text and "rule: stack vs shrunk" in text and "gate reference: vs" in text
    assert "out-of-fold" in text
    art = artifact.load(str(out))
    assert art["head"] == "route" and art["selection"]["forced"] and art["reference_expert"] == "verify"
    assert "verify" not in art["heads"]["route"]["experts"]
    recs = score_records(art, rows)
    assert all(r["expert"] in art["heads"]["route"]["experts"] for r in recs)
    assert json.loads(out.read_text())["selection"]["candidates"]["route"]["oof_accuracy"] >= 0
    swapped = score_records(art, [r.swapped() for r in rows])
    np.testing.assert_allclose([s["score"] for s in swapped], [-s["score"] for s in recs], atol=1e-9)
    assert [s["expert"] for s in swapped] == [s["expert"] for s in recs]
