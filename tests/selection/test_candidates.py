"""The mean, vote and shrunk candidates inside fit: constructed conditions where the shrunk stack must stay at
the mean / must leave it, determinism across row orders, the CLI's head list."""
from __future__ import annotations

import random

import numpy as np

from baer_fast.commands.fit import HEADS
from baer_fast.heads import head_class
from baer_fast.heads.stack import SHRUNK_LAMBDAS
from baer_fast.io.records import Signals
from baer_fast.selection.fit import fit_condition
from baer_fast.selection.gates import HEAD_CHOICES
from tests.heads.synth import _runs


def condition(n: int, accs: dict, *, seed: int, conf: float = 0.3) -> list[Signals]:
    """Experts that are right independently with the given accuracies, all equally confident."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        label = rng.choice("ab")
        sign = 1 if label == "a" else -1
        ex = {name: _runs(rng, sign, acc, conf, missing=0.0) for name, acc in accs.items()}
        out.append(Signals(f"p{i:04d}", ex, subset="all", label=label))
    return out


def test_exchangeable_experts_keep_the_shrunk_stack_at_the_mean():
    """Five independent experts of equal skill: equal weights are the Bayes rule. The shrunk stack stays
    near them (it predicts like the mean) and nothing beats it by 2 SE."""
    rows = condition(300, {f"e{k}": 0.7 for k in range(5)}, seed=1)
    art = fit_condition(rows, condition="eq")
    assert art["head"] == "shrunk", art["selection"]["reason"]
    assert not any(st["advanced"] for st in art["selection"]["gates"]["rule"]["steps"])
    heads = {k: head_class(k).from_json(art["heads"][k]) for k in ("mean", "shrunk")}
    agree = np.mean(np.sign(heads["mean"].score(rows)) == np.sign(heads["shrunk"].score(rows)))
    assert agree >= 0.97


def test_one_strong_expert_among_confident_noise_pulls_the_shrunk_stack_off_the_mean():
    """The mean lets four coin-flipping experts outvote the 95% one; the shrunk stack must move away."""
    accs = {"strong": 0.95, **{f"noise{k}": 0.5 for k in range(4)}}
    art = fit_condition(condition(300, accs, seed=2), condition="one")
    cands = art["selection"]["candidates"]
    assert art["head"] != "mean", art["selection"]["reason"]
    assert art["fit_report"]["shrunk"]["lambda"] < max(SHRUNK_LAMBDAS)
    assert cands["shrunk"]["oof_accuracy"] > cands["mean"]["oof_accuracy"] + 0.1
    assert cands[art["head"]]["oof_accuracy"] > cands["mean"]["oof_accuracy"] + 0.1


def test_the_vote_drops_coin_flipping_experts_that_sink_the_mean():
    """Four coin flips outvote a 95% expert under equal weights; the accuracy-weighted vote gives them
    (almost) nothing, out of fold as well as in the final head."""
    accs = {"strong": 0.95, **{f"noise{k}": 0.5 for k in range(4)}}
    art = fit_condition(condition(300, accs, seed=2), condition="one")
    cands, w = art["selection"]["candidates"], art["fit_report"]["vote"]["weights"]
    assert cands["vote"]["oof_accuracy"] > cands["mean"]["oof_accuracy"] + 0.1
    assert w["strong"] > 0.8 and abs(sum(w.values()) - 1.0) < 1e-12
    assert len(cands["vote"]["fold_accuracy"]) == art["selection"]["nested_cv"]["repeats"]


def test_mean_and_shrunk_figures_do_not_depend_on_row_order():
    rows = condition(120, {"a1": 0.8, "a2": 0.65, "a3": 0.55}, seed=3)
    shuffled = rows[:]
    random.Random(0).shuffle(shuffled)
    a, b = (fit_condition(x, condition="o") for x in (rows, shuffled))
    for c in ("mean", "vote", "shrunk"):
        assert a["selection"]["candidates"][c] == b["selection"]["candidates"][c]      # exact, not approximate
        assert a["heads"][c] == b["heads"][c]
        assert len(a["selection"]["candidates"][c]["fold_accuracy"]) == a["selection"]["nested_cv"]["repeats"]


def test_cli_offers_every_head_the_selection_knows():
    assert HEADS == HEAD_CHOICES
