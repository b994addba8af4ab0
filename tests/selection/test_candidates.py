"""The mean and shrunk candidates inside fit: constructed conditions where the mean must / must not be
deployed, determinism across row orders, the CLI's head list."""
from __future__ import annotations

import random

from baer_fast.commands.fit import HEADS
from baer_fast.io.records import Signals
from baer_fast.selection.fit import fit_condition
from baer_fast.selection.gates import HEAD_CHOICES


def _runs(rng, sign: int, acc: float, conf: float) -> list:
    vote = sign if rng.random() < acc else -sign
    return [round(min(1.0, max(0.0, 0.5 + vote * conf + rng.gauss(0, 0.05))), 6) for _ in range(2)]


def condition(n: int, accs: dict, *, seed: int, conf: float = 0.3) -> list[Signals]:
    """Experts that are right independently with the given accuracies, all equally confident."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        label = rng.choice("ab")
        sign = 1 if label == "a" else -1
        ex = {name: _runs(rng, sign, acc, conf) for name, acc in accs.items()}
        out.append(Signals(f"p{i:04d}", ex, subset="all", label=label))
    return out


def test_exchangeable_experts_keep_the_mean():
    """Five independent experts of equal skill: equal weights are the Bayes rule; nothing beats them by 2 SE."""
    art = fit_condition(condition(300, {f"e{k}": 0.7 for k in range(5)}, seed=1), condition="eq")
    assert art["head"] == "mean", art["selection"]["reason"]
    assert not any(st["advanced"] for st in art["selection"]["gates"]["rule"]["steps"])


def test_one_strong_expert_among_confident_noise_leaves_the_mean():
    """The mean lets four coin-flipping experts outvote the 95% one; a fitted head must win clearly."""
    accs = {"strong": 0.95, **{f"noise{k}": 0.5 for k in range(4)}}
    art = fit_condition(condition(300, accs, seed=2), condition="one")
    cands = art["selection"]["candidates"]
    assert art["head"] != "mean", art["selection"]["reason"]
    assert cands[art["head"]]["oof_accuracy"] > cands["mean"]["oof_accuracy"] + 0.1


def test_mean_and_shrunk_figures_do_not_depend_on_row_order():
    rows = condition(120, {"a1": 0.8, "a2": 0.65, "a3": 0.55}, seed=3)
    shuffled = rows[:]
    random.Random(0).shuffle(shuffled)
    a, b = (fit_condition(x, condition="o") for x in (rows, shuffled))
    for c in ("mean", "shrunk"):
        assert a["selection"]["candidates"][c] == b["selection"]["candidates"][c]      # exact, not approximate
        assert a["heads"][c] == b["heads"][c]
        assert len(a["selection"]["candidates"][c]["fold_accuracy"]) == a["selection"]["nested_cv"]["repeats"]


def test_cli_offers_every_head_the_selection_knows():
    assert HEADS == HEAD_CHOICES
