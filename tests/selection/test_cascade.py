"""Early exit: tau within tolerance, the exit decision symmetric under the swap, stage 2 only where needed."""
from __future__ import annotations

import numpy as np
import pytest

from baer_fast import artifact
from baer_fast.heads.cascade import CascadeHead
from baer_fast.selection.budget import restrict
from baer_fast.selection.cascade import CascadeSpec, choose_tau, fit_cascade, run_staged

from tests.selection.cost_synth import ACCURACY, bank


def _stack_art(records):
    from baer_fast.selection.budget import fit_stack
    from baer_fast.selection.budget import labelled_rows
    from baer_fast.io.splits import SplitSpec
    rows, roles, y = labelled_rows(records, SplitSpec())
    experts = sorted({k for r in records for k in r.experts})
    head, _ = fit_stack(rows, y, roles, experts=experts, categories=["default"])
    return {"condition": "c", "head": "stack", "experts": experts, "heads": {"stack": head.to_json()}}


@pytest.fixture(scope="module")
def fitted():
    records = bank(160, seed=2, accuracy={**ACCURACY, "cheap": 0.9})      # a cheap stage worth exiting on
    return records, fit_cascade(records, _stack_art(records), cascade=CascadeSpec("0.2"))


def test_tau_keeps_cv_accuracy_within_tolerance(fitted):
    _, art = fitted
    cv = art["cascade"]["cv"]
    tol = art["cascade"]["tolerance"]
    assert cv["cv_accuracy"] >= cv["full_cv_accuracy"] - tol - 1e-12 and cv["bound"] >= -tol - 1e-12
    assert art["cascade"]["tau"] >= art["cascade"]["min_confidence"]
    assert 0 < cv["cv_exit_rate"] <= 1
    assert art["cascade"]["stage1_cost_per_pair"] <= 0.2 * art["cascade"]["full_cost_per_pair"] + 1e-9


def test_choose_tau_takes_the_most_exits_within_tolerance():
    y = np.array([1.0, 1.0, -1.0, -1.0])
    s1 = [np.array([3.0, 1.5, -2.0, 1.2])]       # wrong only where least sure (1.2)
    s2 = [np.array([1.0, 1.0, -1.0, -1.0])]
    got = choose_tau(s1, s2, y, 0.0)
    assert got["tau"] == pytest.approx(1.5) and got["cv_exit_rate"] == 0.75 and got["cv_accuracy"] == 1.0
    # one loss in four pairs, with its noise: -1/4 - 1/4 = -0.5, allowed by a tolerance of 0.5 only
    assert choose_tau(s1, s2, y, 0.49)["tau"] == pytest.approx(1.5)
    assert choose_tau(s1, s2, y, 0.5)["tau"] == pytest.approx(1.2)


def test_exit_decision_and_scores_are_swap_symmetric(fitted):
    records, art = fitted
    head = artifact.deployed_head(art)
    assert isinstance(head, CascadeHead)
    swapped = [r.swapped() for r in records]
    ex, ex_sw = head.exits(records), head.exits(swapped)
    assert ex.any() and not ex.all()
    assert np.array_equal(ex, ex_sw)
    s, s_sw = head.score(records), head.score(swapped)
    # a swap maps u -> 1 - u: the scores negate up to the rounding of those runs (a few ulps of |z|)
    assert np.allclose(s_sw, -s, rtol=0, atol=64 * np.finfo(float).eps * max(1.0, np.abs(s).max()))


def test_run_staged_runs_the_rest_only_for_unsure_pairs(fitted):
    records, art = fitted
    by_id = {r.id: r for r in records}
    calls = []

    def run(pairs, experts, given=None):
        calls.append((len(pairs), tuple(experts)))
        return [type(r)(r.id, r.experts, r.subset, r.label, r.split,
                        {"expert_cost": {k: r.meta["expert_cost"][k] for k in experts}})
                for r in restrict([by_id[p.id] for p in pairs], experts)]

    out, report = run_staged(art, records, run)
    head = artifact.deployed_head(art)
    ex = head.exits(records)
    assert calls[0] == (len(records), tuple(art["cascade"]["stage1_experts"]))
    assert calls[1][0] == int((~ex).sum()) and len(calls) == 2            # one batched second stage
    assert report["exited"] == int(ex.sum()) and report["exit_fraction"] == pytest.approx(ex.mean())
    assert np.array_equal(head.score(out), head.score(records))           # same scores as the whole bank
    assert report["tokens_decoded_per_pair"] < sum(c["decoded"] for c in records[0].meta["expert_cost"].values())


def test_stage1_budget_errors_name_the_cascade_option(fitted):
    from baer_fast.errors import InputError

    records, _ = fitted
    for cheap, says in (("tokens=5", "no expert subset fits"), ("abc", "expected a fraction")):
        with pytest.raises(InputError) as err:
            fit_cascade(records, _stack_art(records), cascade=CascadeSpec(cheap))
        assert err.value.field == "--cascade-budget" and says in err.value.message
        assert "--budget" not in err.value.message.replace("--cascade-budget", "")


def test_no_cascade_when_the_cheap_stage_is_the_whole_head(fitted, caplog):
    """A head pruned to what the cheap budget affords (fit --budget 0.2 --cascade) has no second stage to skip."""
    import logging

    records, _ = fitted
    pruned = restrict(records, ["cheap"])           # cost about 110 of the bank's 1800: inside a 0.2 stage
    full = _stack_art(pruned)
    with caplog.at_level(logging.WARNING, logger="baer_fast"):
        art = fit_cascade(records, full, cascade=CascadeSpec("0.2"))
    assert "cascade" not in art and {k: v for k, v in art.items() if k != "cascade_declined"} == full
    assert art["cascade_declined"]["reason"] == "the cheap stage holds every expert"
    assert "no second stage to skip" in caplog.text


def test_merge_keeps_both_stages_meta():
    """A merged record holds both stages' per-expert meta (costs and generation settings: before, the
    second stage's generation settings replaced the first's) and sums their prompt token counts."""
    from baer_fast.io.records import Signals
    from baer_fast.selection.cascade import merge
    first = Signals("p", {"cot": [0.6, 0.4]}, "s", "a", "test",
                    {"len_a": 3, "tokens_prefilled": 100, "tokens_naive": 180, "engine": "prefix",
                     "generation": {"cot": {"max_new_tokens": 64, "seed": 0}},
                     "expert_cost": {"cot": {"prefilled": 100, "decoded": 40}}})
    second = Signals("p", {"deliberate": [0.7, 0.3]}, "s", "a", "test",
                     {"len_a": 3, "tokens_prefilled": 60, "tokens_naive": 90, "engine": "prefix",
                      "generation": {"deliberate": {"max_new_tokens": 32, "seed": 0}},
                      "expert_cost": {"deliberate": {"prefilled": 60, "decoded": 20}}})
    m = merge(first, second)
    assert m.experts == {"cot": [0.6, 0.4], "deliberate": [0.7, 0.3]}
    assert m.meta["generation"] == {"cot": {"max_new_tokens": 64, "seed": 0},
                                    "deliberate": {"max_new_tokens": 32, "seed": 0}}
    assert m.meta["expert_cost"] == {"cot": {"prefilled": 100, "decoded": 40}, "deliberate": {"prefilled": 60, "decoded": 20}}
    assert (m.meta["tokens_prefilled"], m.meta["tokens_naive"], m.meta["len_a"]) == (160, 270, 3)


@pytest.mark.parametrize("stage1", [["direct"], ["pride"]])
def test_stage_two_alone_prices_only_what_stage_two_runs(monkeypatch, stage1):
    """Stage 2 is given stage 1's runs: PriDe after direct is read from them, and direct after PriDe
    ran with it (bank/runner.free_sources); stage2_alone_cost_per_pair charges neither (it charged
    direct's whole cost)."""
    from baer_fast.io.splits import SplitSpec
    from baer_fast.selection import cascade
    from baer_fast.selection.budget import expert_costs, labelled_rows
    records = bank(90, seed=3, accuracy={"direct": 0.8, "pride": 0.8, "score": 0.85},
                   cost={"direct": 100, "pride": 0, "score": 600})
    for r in records:
        r.meta["expert_cost"]["pride"] = {"prefilled": 0, "decoded": 0, "from": "direct"}
    real = cascade.plan_with_nested

    def with_stage1(*args, **kw):
        plan, nested = real(*args, **kw)
        return {**plan, "experts": stage1}, nested
    monkeypatch.setattr(cascade, "plan_with_nested", with_stage1)
    art = fit_cascade(records, _stack_art(records), cascade=CascadeSpec("0.2"))
    costs, _ = expert_costs(labelled_rows(records, SplitSpec())[0], ["direct", "pride", "score"])
    assert art["cascade"]["stage1_experts"] == stage1
    assert art["cascade"]["stage2_alone_cost_per_pair"] == pytest.approx(costs["score"])


@pytest.mark.parametrize("generative", [False, True])
def test_expected_cost_is_the_one_the_runtime_runs(caplog, generative):
    """Stage 2 reads stage 1's shared prompt prefixes only where no stage generates text
    (bank/prefix_store.worth_keeping); where one does (the signals' meta.generation names it), it
    prefills them again, and expected_cost_per_pair says so. A cascade that then costs more than the
    full head (nothing exits here) is not added: the full head is deployed alone, and the artifact's
    `cascade_declined` gives the figures (before, it was added with a warning)."""
    import logging
    records = bank(90, seed=3, accuracy={"cheap": 0.6, "huge": 0.85}, cost={"cheap": 100, "huge": 600})
    for r in records:
        r.meta["prefill_shared"] = [[200, ["cheap", "huge"]]]
        for e in ("cheap", "huge"):
            r.meta["expert_cost"][e]["shared"] = 100
        if generative:
            r.meta["generation"] = {"huge": {"max_new_tokens": 8, "seed": 0}}
    full = _stack_art(records)
    with caplog.at_level(logging.WARNING, logger="baer_fast"):
        art = fit_cascade(records, full, cascade=CascadeSpec("0.4"))
    assert ("more than the full head's" in caplog.text) is generative
    if generative:
        d = art["cascade_declined"]
        assert "cascade" not in art and {k: v for k, v in art.items() if k != "cascade_declined"} == full
        assert d["stage1_experts"] == ["cheap"] and d["cv_exit_rate"] == 0.0
        assert d["expected_cost_per_pair"] > d["full_cost_per_pair"]
        assert artifact.deployed_head(art).score(records).tolist() == artifact.deployed_head(full).score(records).tolist()
        return
    c = art["cascade"]
    assert c["stage1_experts"] == ["cheap"] and c["cv"]["cv_exit_rate"] == 0.0
    assert c["stage2_reads_stage1_prefixes"] is True
    again = c["stage1_cost_per_pair"] + c["stage2_alone_cost_per_pair"]
    assert c["expected_cost_per_pair_prefilled_again"] == pytest.approx(again)
    assert again > c["full_cost_per_pair"]
    assert c["expected_cost_per_pair"] == pytest.approx(c["full_cost_per_pair"])


def test_score_from_signals_says_how_many_pairs_exit(fitted, tmp_path, cli, caplog):
    """`score --signals` with a cascade head scores every pair from the full bank's signals; it says how
    many would have exited after stage 1 (what a run with --model skips), as `score --model` does."""
    import logging

    from baer_fast.io.records import write_signals
    records, art = fitted
    artifact.save(str(tmp_path / "h.json"), art)
    write_signals(str(tmp_path / "s.jsonl"), records)
    with caplog.at_level(logging.INFO, logger="baer_fast"):
        code, _, _ = cli("score", "--signals", tmp_path / "s.jsonl", "--head", tmp_path / "h.json",
                         "--out", tmp_path / "sc.jsonl")
    exits = int(artifact.deployed_head(art).exits(records).sum())
    assert code == 0 and 0 < exits < len(records)
    assert f"cascade: {exits} of {len(records)} pairs exit after stage 1" in caplog.text


@pytest.mark.parametrize("tol", ["nan", "inf", "-0.01", "1", "5"])
def test_a_cascade_tolerance_that_is_no_fraction_is_refused_before_any_fit(tol, tmp_path, capsys):
    """--cascade-tolerance nan ran the whole fit, then died writing the artifact (NaN is no JSON)."""
    from baer_fast.cli import main
    from baer_fast.io.records import write_signals

    sig, out = tmp_path / "s.jsonl", tmp_path / "h.json"
    write_signals(str(sig), bank(60, seed=3))
    assert main(["fit", "--signals", str(sig), "--condition", "c", "--out", str(out), "--cascade",
                 "--cascade-tolerance", tol]) == 2
    err = capsys.readouterr().err
    assert "--cascade-tolerance" in err and "[0, 1)" in err and "Traceback" not in err
    assert not out.exists() and "nested CV" not in err


def test_eval_reports_the_cascade_and_its_exits_on_the_split(fitted, tmp_path, cli):
    """`eval --head` with a cascade head says what the head runs: stage 1, tau, the expected cost, and how
    many of the evaluated split's pairs stage 1 decides (before, eval and its report said nothing of cost)."""
    import json

    from baer_fast.io.records import write_signals
    from baer_fast.io.splits import SplitSpec, roles
    records, art = fitted
    artifact.save(str(tmp_path / "h.json"), art)
    write_signals(str(tmp_path / "s.jsonl"), records)
    assert cli("score", "--signals", tmp_path / "s.jsonl", "--head", tmp_path / "h.json",
               "--out", tmp_path / "sc.jsonl")[0] == 0
    args = ("eval", "--signals", tmp_path / "s.jsonl", "--scores", tmp_path / "sc.jsonl", "--head", tmp_path / "h.json")
    code, out, _ = cli(*args, "--json", "--report", tmp_path / "rep")
    assert code == 0
    c = json.loads(out)["cost"]["cascade"]
    test = [r for r, role in zip(records, roles(records, SplitSpec())) if role == "test"]
    want = artifact.deployed_head(art).exits(test)
    assert c["split_pairs"] == len(test) and c["split_exits"] == int(want.sum()) and 0 < c["split_exits"] < len(test)
    assert c["stage1_experts"] == art["cascade"]["stage1_experts"] and c["tau"] == art["cascade"]["tau"]
    page = (tmp_path / "rep" / "report.html").read_text()
    assert "<h2>Cost</h2>" in page and f"<td>cascade.split_exits</td><td>{c['split_exits']}</td>" in page
    code, out, _ = cli(*args)
    assert f"{c['split_exits']} of {len(test)} pairs of this split exit after stage 1" in out


def test_eval_says_when_fit_added_no_cascade(fitted, tmp_path, cli):
    from baer_fast.io.records import write_signals
    records, _ = fitted
    full = _stack_art(restrict(records, ["cheap"]))
    art = fit_cascade(records, full, cascade=CascadeSpec("0.2"))
    artifact.save(str(tmp_path / "h.json"), art)
    write_signals(str(tmp_path / "s.jsonl"), records)
    assert cli("score", "--signals", tmp_path / "s.jsonl", "--head", tmp_path / "h.json",
               "--out", tmp_path / "sc.jsonl")[0] == 0
    code, out, _ = cli("eval", "--signals", tmp_path / "s.jsonl", "--scores", tmp_path / "sc.jsonl",
                       "--head", tmp_path / "h.json")
    assert code == 0 and "cascade: none added (the cheap stage holds every expert" in out
