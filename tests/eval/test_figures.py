"""The eval figures against hand-computed values: calibration, bias, bootstrap, leaderboard, groups."""
from __future__ import annotations

import math

import numpy as np
import pytest

from baer_fast.eval.bias import bias, length_bias, position_consistency
from baer_fast.eval.bootstrap import accuracy_interval
from baer_fast.eval.breakdown import per_category, per_subset
from baer_fast.eval.calibration import calibration, calibration_of
from baer_fast.eval.leaderboard import rewardbench, rewardbench_2, section_scores
from baer_fast.io.records import Signals

from tests.fixtures.tolerances import fp64_tol  # noqa: E402

TOL = fp64_tol(64, 4.0)   # float64: < 64 roundings of terms of magnitude < 4 (|log 0.1| = 2.3)


def test_calibration_by_hand():
    p = np.array([0.8, 0.3, 0.6, 0.1])
    is_a = np.array([True, False, False, True])
    c = calibration_of(p, is_a)
    assert c["n"] == 4
    assert abs(c["brier"] - (0.2 ** 2 + 0.3 ** 2 + 0.6 ** 2 + 0.9 ** 2) / 4) < TOL
    assert abs(c["log_loss"] + (math.log(0.8) + math.log(0.7) + math.log(0.4) + math.log(0.1)) / 4) < TOL
    # one pair per bin: ECE = mean |p - y| = (0.2 + 0.3 + 0.6 + 0.9) / 4
    assert abs(c["ece"] - 0.5) < TOL and [b["n"] for b in c["bins"]] == [1, 1, 1, 1]


def test_calibration_of_head_and_experts_on_labelled_rows():
    recs = [Signals("1", {"e": [0.9, 0.7]}, label="a"), Signals("2", {"e": [0.2, None]}, label="b"),
            Signals("3", {"e": [None, None]}, label="a"), Signals("4", {"e": [0.5, 0.5]}, label="tie")]
    scores = np.array([0.0, 0.0, 0.0, 5.0])
    rows = np.array([True, True, True, False])
    c = calibration(recs, scores, ["e"], rows)
    assert c["head"]["n"] == 3 and abs(c["head"]["brier"] - 0.25) < TOL       # sigmoid(0) = 0.5
    e = c["experts"]["e"]
    assert e["n"] == 2 and abs(e["brier"] - ((1 - 0.8) ** 2 + 0.2 ** 2) / 2) < TOL


def test_position_bias_first_shown_and_consistency():
    recs = [Signals("1", {"e": [0.9, 0.9]}), Signals("2", {"e": [0.8, 0.1]}), Signals("3", {"e": [0.6, 0.6]})]
    pos = position_consistency(recs, ["e"], [True, True, True])["e"]
    # order ab picks a (first) in all three; order ba: u_ba 0.9 -> a (second), 0.1 -> b (first), 0.6 -> a
    assert pos["first_shown_rate"] == 4 / 6
    assert abs(pos["consistency"] - 2 / 3) < TOL and pos["n_run_pairs"] == 3


def test_length_bias_by_hand():
    lens = [(100, 10), (10, 100), (50, 50), (200, 100)]
    recs = [Signals(str(i), {}, label=lab, meta={"len_a": a, "len_b": b})
            for i, ((a, b), lab) in enumerate(zip(lens, ["a", "a", "b", "b"]))]
    preds = {"m": np.array([1, -1, 1, 0])}
    out = length_bias(recs, preds, np.ones(4, bool))
    # lengths differ in pairs 0, 1, 3; m predicts in 0 and 1: longer in both
    assert out["prefers_longer"]["m"] == {"n": 2, "rate": 1.0}
    # longer wins: +1, -1, 0, +1 vs labels +1, +1, -1, -1 -> correct once of 4; coverage 3/4
    assert out["longer_wins"] == {"accuracy": 0.25, "coverage": 0.75}
    # (len winner - len loser) / max: 0.9, -0.9, 0, -0.5
    n_by_bin = {(b["lo"], b["hi"]): b["n"] for b in out["bins"]}
    assert n_by_bin[(0.5, 1.0)] == 1 and n_by_bin[(-1.0, -0.5)] == 1 and n_by_bin[(-0.05, 0.05)] == 1
    assert n_by_bin[(-0.5, -0.2)] == 1                       # -0.5 falls in [-0.5, -0.2)
    top = next(b for b in out["bins"] if b["lo"] == 0.5)
    assert top["accuracy"] == {"m": 1.0, "longer wins": 1.0}


def test_bias_without_lengths_says_so():
    out = bias([Signals("1", {"e": [0.9, 0.2]}, label="a")], np.array([1.0]), ["e"], np.array([True]))
    assert out["length"]["bins"] == [] and out["length"]["longer_wins"] is None


def test_bootstrap_interval_is_seeded_and_brackets_the_accuracy():
    correct = np.array([1] * 70 + [0] * 30)
    a = accuracy_interval(correct, n_resamples=2000, seed=1)
    assert a == accuracy_interval(correct, n_resamples=2000, seed=1)
    assert a != accuracy_interval(correct, n_resamples=2000, seed=2)
    assert a["low"] < 0.7 < a["high"] and a["accuracy"] == 0.7
    # the normal approximation's width 2 * 1.96 * sqrt(.7 * .3 / 100) = 0.18, within a quarter
    assert abs((a["high"] - a["low"]) - 0.1796) < 0.045
    ones = accuracy_interval(np.ones(10), n_resamples=100, seed=0)
    assert ones["low"] == ones["high"] == 1.0


def test_rewardbench_sections_weight_by_example_counts():
    acc = {"alpacaeval-easy": 1.0, "mt-bench-easy": 0.5, "math-prm": 0.5, "hep-python": 1.0,
           "anthropic_helpful": 0.6, "shp": 0.8}
    s = section_scores(acc)
    chat = (100 * 1.0 + 28 * 0.5) / 128
    reasoning = (984 * 0.5 + 164 * 1.0) / (984 + 164)
    assert abs(s["Chat"] - chat) < TOL and abs(s["Reasoning"] - reasoning) < TOL
    assert abs(s["Prior Sets (0.5 weight)"] - 0.7) < TOL
    assert abs(s["Score"] - (2 * chat + 2 * reasoning + 0.7) / 5) < TOL
    assert "Safety" not in s
    board = rewardbench({k: {"accuracy": v, "n": 1} for k, v in acc.items()}, model="m")
    assert board["results"]["model"] == "m" and board["results"]["shp"] == 0.8
    assert "donotanswer" in board["missing_subsets"]


def test_rewardbench_2_counts_a_prompt_only_when_every_pair_is_right(tmp_path, capsys):
    """Best-of-N by hand: Math p1 (3 pairs right) and p2 (one wrong) -> 0.5; Focus p3 right -> 1.0;
    Score = their mean. Rows outside the split are not read; a pair without prompt_id is refused.
    Then the same through `eval --leaderboard rewardbench-2`."""
    import json

    from baer_fast.cli import main
    from baer_fast.errors import InputError
    from baer_fast.io.records import write_signals

    spec = [("Math", "p1", True)] * 3 + [("Math", "p2", True), ("Math", "p2", False), ("Math", "p2", True),
                                         ("Focus", "p3", True), ("Focus", "p3", True), ("Focus", "p3", True)]
    recs = [Signals(f"rewardbench-{pid}-c0-r{k % 3}", {"e": [0.9, 0.8]}, subset=sub, label="a",
                    meta={"prompt_id": pid, "split_group": f"rewardbench-{pid}"})
            for k, (sub, pid, _) in enumerate(spec)]
    correct = np.array([ok for _, _, ok in spec])
    board = rewardbench_2({}, model="m", records=recs, correct=correct, rows=np.ones(9, bool))
    assert board["sections"] == {"Focus": 1.0, "Math": 0.5, "Score": 0.75}
    assert board["prompts"] == {"Focus": 1, "Math": 2} and "Ties" in board["missing_subsets"]
    rows = np.ones(9, bool)
    rows[4] = False                                   # the wrong pair outside the split: p2 counts as right
    assert rewardbench_2({}, model="m", records=recs, correct=correct, rows=rows)["sections"]["Math"] == 1.0
    bare = [Signals("x", {"e": [0.9, 0.8]}, subset="Math", label="a")]
    with pytest.raises(InputError, match="needs pairs imported from RewardBench 2"):
        rewardbench_2({}, model="m", records=bare, correct=np.ones(1, bool), rows=np.ones(1, bool))

    signals, scores = tmp_path / "s.jsonl", tmp_path / "scores.jsonl"
    write_signals(str(signals), recs)
    scores.write_text("".join(json.dumps({"id": r.id, "score": 1.0 if ok else -1.0}) + "\n"
                              for r, (_, _, ok) in zip(recs, spec)))
    assert main(["eval", "--signals", str(signals), "--scores", str(scores), "--split", "all", "--json",
                 "--leaderboard", "rewardbench-2", "--bootstrap", "50"]) == 0
    got = json.loads(capsys.readouterr().out)["leaderboard"]
    assert got["sections"] == {"Focus": 1.0, "Math": 0.5, "Score": 0.75} and "margin-weighted" in got["note"]


def test_per_subset_and_category_by_hand():
    recs = [Signals("1", {"e": [0.9, 0.8]}, subset="s1", category="c", label="a"),
            Signals("2", {"e": [0.9, 0.8]}, subset="s1", label="b"),
            Signals("3", {"e": [0.2, 0.1]}, subset="s2", category="c", label="b"),
            Signals("4", {"e": [0.2, 0.1]}, subset="s2", category="c", label="tie")]
    scores = np.array([1.0, 1.0, -1.0, 1.0])
    rows = np.array([True, True, True, False])
    sub = per_subset(recs, scores, ["e"], rows)
    assert sub == {"s1": {"n": 2, "accuracy": 0.5, "experts": {"e": 0.5}},
                   "s2": {"n": 1, "accuracy": 1.0, "experts": {"e": 1.0}}}
    assert per_category(recs, scores, ["e"], rows) == {"c": {"n": 2, "accuracy": 1.0, "experts": {"e": 1.0}}}


@pytest.mark.parametrize("n", [0, 1])
def test_degenerate_inputs(n):
    assert calibration_of(np.full(n, 0.5), np.zeros(n, bool))["n"] == n
    assert accuracy_interval(np.ones(n), n_resamples=10, seed=0)["low"] is None
