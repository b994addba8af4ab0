"""Pruning under a budget: respected, deterministic, leak-free, recorded in the artifact."""
from __future__ import annotations

import json
import random
import re

import numpy as np
import pytest

from baer_fast import artifact
from baer_fast.cli import main
from baer_fast.errors import InputError
from baer_fast.io.records import write_signals
from baer_fast.selection.budget import fit_budget, newton_odd_logistic, parse_budget, plan_budget
from baer_fast.io.splits import SplitSpec

from tests.selection.cost_synth import assert_same_saved, bank, blank_test_labels


@pytest.fixture(scope="module")
def records():
    return bank(150, seed=1)


@pytest.mark.parametrize("budget", ["0.33", "0.5", "tokens=400"])
def test_budget_is_respected(records, budget):
    plan = plan_budget(records, budget)
    kind, value = parse_budget(budget)
    limit = value * plan["full_cost_per_pair"] if kind == "fraction" else value
    assert plan["cost_per_pair"] <= limit + 1e-9
    assert plan["cost_per_pair"] == pytest.approx(sum(plan["expert_costs"][e] for e in plan["experts"]))
    assert all(v["cost"] <= limit + 1e-9 for v in plan["visited"] if v["experts"] == plan["experts"])
    assert plan["cost_source"] == "measured"
    # nothing visited within the budget and within noise of the full stack (or anything within the budget,
    # when none is) has a better CV log-loss (the default criterion) than the chosen subset
    from baer_fast.selection.budget import near_full
    chosen = next(v for v in plan["visited"] if v["experts"] == plan["experts"])
    within = [v for v in plan["visited"] if v["cost"] <= limit + 1e-9]
    pool = [v for v in within if near_full(v)] or within
    assert chosen["cv_logloss"] == min(v["cv_logloss"] for v in pool)
    assert plan["near_full"] == near_full(chosen)


def test_subset_is_deterministic_and_order_free(records):
    a = plan_budget(records, "0.33")
    shuffled = list(records)
    random.Random(5).shuffle(shuffled)
    b = plan_budget(shuffled, "0.33")
    assert {tuple(v["experts"]): v["cv_accuracy"] for v in a["visited"]} == \
        {tuple(v["experts"]): v["cv_accuracy"] for v in b["visited"]}
    assert a["experts"] == b["experts"]
    assert plan_budget(records, "0.33") == a


def test_blanking_test_labels_leaves_the_artifact_unchanged(tmp_path):
    spec, records = SplitSpec(), bank(90, seed=4)
    a = fit_budget(records, "0.5", condition="c", spec=spec)
    b = fit_budget(blank_test_labels(records, spec), "0.5", condition="c", spec=spec)
    assert_same_saved(tmp_path, a, b)
    assert a["experts"] == a["budget"]["experts"]


def test_infeasible_and_malformed_budgets_are_input_errors(records):
    with pytest.raises(InputError, match="no expert subset fits"):
        plan_budget(records, "tokens=10")
    # the message names the cheapest expert and what it costs, whatever the search visited
    # (the backward pass ends on a single expert that need not be the cheapest)
    with pytest.raises(InputError, match="--budget tokens=40 allows 40 per pair") as err:
        plan_budget(records, "tokens=40")
    m = re.search(r"the cheapest expert, (\w+), costs ([\d.]+);", str(err.value))
    assert m and m[1] == "noise" and 50 <= float(m[2]) <= 70          # cost_synth: 40-60 prefilled + 10 decoded
    for bad in ("0", "1.5", "abc", "tokens=-3", "flops=3"):
        with pytest.raises(InputError, match="--budget"):
            parse_budget(bad)


def test_costs_file_overrides_meta_and_unit_default(records, tmp_path):
    from baer_fast.selection.costs import expert_costs, read_costs_file
    p = tmp_path / "costs.json"
    p.write_text(json.dumps({k: 1 for k in ("cheap", "mid", "pricey", "huge", "noise")}))
    costs, source = expert_costs(records, ["cheap", "huge"], read_costs_file(str(p)))
    assert costs == {"cheap": 1.0, "huge": 1.0} and source == "file+measured"
    plain = [type(r)(r.id, r.experts, r.subset, r.label, r.split, {}) for r in records]
    assert expert_costs(plain, ["cheap", "huge"]) == ({"cheap": 1.0, "huge": 1.0}, "unit")
    p.write_text(json.dumps({"cheap": "many"}))
    with pytest.raises(InputError, match="non-negative"):
        read_costs_file(str(p))


def test_newton_solver_matches_the_stack_fit():
    from baer_fast.heads.stack import fit_odd_logistic
    rng = np.random.default_rng(0)
    x = rng.normal(size=(80, 6))
    y = np.where(x[:, 0] + rng.normal(size=80) > 0, 1.0, -1.0)
    for lam in (1.0, 0.01):
        # both minimise the same strictly convex objective; sklearn stops at tol=1e-10 on its gradient
        assert np.allclose(newton_odd_logistic(x, y, lam), fit_odd_logistic(x, y, lam), atol=1e-6)


def test_fit_cli_budget_then_frontier(tmp_path, capsys):
    sig = tmp_path / "s.jsonl"
    write_signals(str(sig), bank(90, seed=6))
    out = tmp_path / "h.json"
    assert main(["fit", "--signals", str(sig), "--condition", "c", "--out", str(out), "--budget", "0.5"]) == 0
    art = artifact.load(str(out))
    assert art["experts"] == art["budget"]["experts"]
    assert art["budget"]["cost_per_pair"] <= 0.5 * art["budget"]["full_cost_per_pair"] + 1e-9
    png = tmp_path / "f.png"
    assert main(["frontier", "--signals", str(sig), "--budget", "0.5", "--plot", str(png)]) == 0
    text = capsys.readouterr().out
    assert "* chosen at budget 0.5: " + ", ".join(art["budget"]["experts"]) in text
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_a_native_expert_pays_for_its_source():
    """A native verdict records 0 tokens when its generative expert runs in the same bank (it
    reads that expert's texts). Alone in a subset it would look free: the search charges its
    source. Here the native is the best expert, so a search that took it for free would pick it
    under a budget its source does not fit."""
    from baer_fast.io.records import Signals
    from baer_fast.selection.budget import expert_sources, subset_cost
    acc = {"cheap": 0.72, "mid": 0.74, "gen": 0.80, "gen_native": 0.86}
    cost = {"cheap": 100, "mid": 150, "gen": 900, "gen_native": 0}
    recs = bank(150, seed=3, accuracy=acc, cost=cost)
    recs = [Signals(r.id, r.experts, r.subset, r.label, r.split,
                    {**r.meta, "expert_cost": {**r.meta["expert_cost"],
                                               "gen_native": {"prefilled": 0, "decoded": 0, "from": "gen"}}})
            for r in recs]
    experts = sorted(acc)
    sources = expert_sources(recs, experts)
    assert sources == {"gen_native": "gen"}
    costs = {"cheap": 1.0, "mid": 2.0, "gen": 9.0, "gen_native": 0.0}
    assert subset_cost(costs, ["gen_native"], sources) == subset_cost(costs, ["gen", "gen_native"], sources) == 9.0
    assert subset_cost(costs, ["gen_native"]) == 0.0                     # what a plain sum would say
    plan = plan_budget(recs, "0.3")
    assert "gen_native" not in plan["experts"] and "gen" not in plan["experts"]
    assert all(v["cost"] == pytest.approx(subset_cost(plan["expert_costs"], v["experts"], sources))
               for v in plan["visited"])
    assert plan["expert_sources"] == {"gen_native": "gen"}


def test_the_bank_records_where_a_native_or_derived_expert_comes_from(qwen_dir):
    from baer_fast.bank.generative import GenerationConfig
    from baer_fast.bank.runner import run_experts
    from baer_fast.io.records import Pair
    ps = [Pair(f"n{i}", "Which is prime, 7 or 8?", f"seven {i}", f"eight {i} because") for i in range(2)]
    sig = run_experts(qwen_dir, ps, experts=["direct", "pride", "cot", "cot_native"],
                      generation=GenerationConfig(max_new_tokens={"cot": 4}))
    for s in sig:
        cost = s.meta["expert_cost"]
        assert cost["cot_native"]["from"] == "cot" and cost["pride"]["from"] == "direct"
        assert "from" not in cost["cot"] and "from" not in cost["direct"]


def test_costs_that_are_all_zero_are_refused_not_read_as_free(records):
    """Recorded costs of 0 for every expert make every subset fit every budget: an error, not a choice."""
    from baer_fast.selection.costs import expert_costs
    zero = [type(r)(r.id, r.experts, r.subset, r.label, r.split,
                    {"expert_cost": {e: {"prefilled": 0, "decoded": 0} for e in r.experts}}) for r in records]
    with pytest.raises(InputError, match="recorded cost is 0") as e:
        expert_costs(zero, ["cheap", "huge"])
    assert e.value.field == "meta.expert_cost"


def test_an_llmbar_copy_without_its_texts_records_no_cost_and_budgets_count_experts():
    """The demo's sample keeps verdicts but not the generated texts: nothing to estimate tokens from, so
    no meta.expert_cost (it used to record 0 tokens for every expert, which the budget read as free)."""
    from baer_fast.commands.demo import sample_dir
    from baer_fast.io.adapters import load
    from baer_fast.io.adapters.costs import llmbar_cost
    from baer_fast.selection.costs import expert_costs

    assert llmbar_cost({"input": "q", "output_1": "a", "output_2": "b"}, {"results": [{}]}, "CoT") is None
    got = llmbar_cost({"input": "q", "output_1": "a", "output_2": "b"},
                      {"results": [{"swap = False": {"completion": ["Output (a)", "stop"]}}]}, "CoT")
    assert got["decoded"] == 3 and got["prefilled"] > 200
    bank = load("llmbar", sample_dir()).banks["GPT-4"]
    assert not any("expert_cost" in s.meta for s in bank)
    costs, source = expert_costs(bank, sorted(bank[0].experts))
    assert source == "unit" and set(costs.values()) == {1.0}


def test_frontier_warns_of_costs_for_experts_the_signals_lack_as_fit_does(tmp_path, caplog):
    import logging
    sig, costs = tmp_path / "s.jsonl", tmp_path / "c.json"
    write_signals(str(sig), bank(60, seed=6))
    costs.write_text(json.dumps({"cheap": 1, "typo_expert": 5}))
    with caplog.at_level(logging.WARNING, logger="baer_fast"):
        assert main(["frontier", "--signals", str(sig), "--costs", str(costs), "--budget", "0.5"]) == 0
    assert "names typo_expert, which the signals do not have" in caplog.text
