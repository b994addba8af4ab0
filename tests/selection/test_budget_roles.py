"""`fit --budget` when the search picks the expert a plain fit sets aside (pointwise, reference)."""
from __future__ import annotations

import numpy as np
import pytest

from baer_fast import artifact
from baer_fast.cli import main
from baer_fast.io.records import write_signals
from baer_fast.selection.budget import fit_budget

from tests.selection.cost_synth import bank


def _bank(role: str) -> list:
    # the role's expert is the only one within tokens=150 (its cost: 50 +- 20%, plus 10 decoded)
    return bank(120, seed=4, accuracy={role: 0.8, "mid": 0.78, "huge": 0.86},
                cost={role: 50, "mid": 300, "huge": 900})


@pytest.mark.parametrize("role", ["pointwise", "reference"])
def test_a_subset_of_only_the_set_aside_expert_is_fitted_as_the_stack(role):
    records = _bank(role)
    art = fit_budget(records, "tokens=150", condition="c")
    assert art["experts"] == [role] and art["budget"]["experts"] == [role]
    assert art[f"{role}_expert"] is None            # scored as the search scored it: the stack's expert
    head = artifact.deployed_head(art)
    s = np.asarray(head.score(records))
    assert np.abs(s).max() > 0
    assert np.allclose(np.asarray(head.score([r.swapped() for r in records])), -s, rtol=0, atol=1e-9)   # DESIGN.md


def test_a_larger_subset_still_sets_the_pointwise_expert_aside():
    records = _bank("pointwise")
    art = fit_budget(records, "tokens=450", condition="c")
    assert art["experts"] == ["mid", "pointwise"]
    assert art["pointwise_expert"] == "pointwise"


def test_fit_cli_budget_of_the_pointwise_expert_alone(tmp_path, capsys):
    sig = tmp_path / "s.jsonl"
    write_signals(str(sig), _bank("pointwise"))
    out = tmp_path / "h.json"
    assert main(["fit", "--signals", str(sig), "--condition", "c", "--out", str(out), "--budget", "tokens=150"]) == 0
    assert artifact.load(str(out))["experts"] == ["pointwise"]
    assert "1 expert (pointwise)" in capsys.readouterr().out


@pytest.mark.parametrize("head", ["auto", "shrunk"])
def test_per_subset_a_subset_given_only_the_pointwise_expert_keeps_its_evidence(head):
    """Per subset, x's pairs get the pointwise expert alone; set aside as routing-only, a stack or shrunk head
    (what auto deploys on most banks) read nothing on them and scored every one 0."""
    from dataclasses import replace

    from baer_fast.selection.allocation import space_for
    acc = {"x": {"pointwise": 0.95, "cheap_y": 0.5, "huge": 0.8}, "y": {"pointwise": 0.5, "cheap_y": 0.95, "huge": 0.8}}
    cost = {"pointwise": 100, "cheap_y": 100, "huge": 900}
    records = [replace(r, id=f"{g}-{r.id}", subset=g) for k, (g, a) in enumerate(sorted(acc.items()))
               for r in bank(100, seed=k, accuracy=a, cost=cost)]
    art = fit_budget(records, "0.15", condition="c", space_for=space_for, head=head)
    assert art["allocation"] == {"x": ["pointwise"], "y": ["cheap_y"]}
    xs = [r for r in records if r.subset == "x"]
    s = np.asarray(artifact.deployed_head(art).score(xs))
    y = np.array([1.0 if r.label == "a" else -1.0 for r in xs])
    assert np.all(s != 0) and np.mean(np.sign(s) == y) > 0.8       # pointwise is right on 95% of x's pairs
