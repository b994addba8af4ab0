"""The runtime bank of benchmarks/cost_accuracy.py: the costs the budget search and the cascade see are
the ones a real `baer-fast experts` run measured (meta.expert_cost), not the one-unit default; the
signals are cached, so a rerun does not run the model. Tiny judge, a dozen pairs, 4-token generations."""
import functools

import numpy as np
import pytest

from tests.fixtures.checks import import_bench
from tests.fixtures.tiny_models import make_pairs

EXPERTS = "direct,score,pride,cot"     # a generative expert (and its cot_native), a derived one, two single-pass


@pytest.fixture(scope="module")
def bank(qwen_dir, tmp_path_factory):
    ca = import_bench("cost_accuracy")
    cache = str(tmp_path_factory.mktemp("runtime-cache"))
    pairs = make_pairs(15, seed=3)          # splits by position: 5 selection, 5 calibration, 5 test
    records = ca.cost_runtime.runtime_records(cache, pairs=pairs, model_dir=qwen_dir, max_new_tokens=4,
                                              experts=EXPERTS)
    return ca, cache, pairs, records


def measured(records, expert) -> float:
    return float(np.mean([r.meta["expert_cost"][expert]["prefilled"] + r.meta["expert_cost"][expert]["decoded"]
                          for r in records]))


def test_budget_search_sees_the_measured_costs(bank):
    from baer_fast.io.splits import SplitSpec
    from baer_fast.selection.budget import labelled_rows, plan_budget
    _, _, _, records = bank
    assert sorted(records[0].meta["expert_cost"]) == ["cot", "cot_native", "direct", "pride", "score"]
    plan = plan_budget(records, "0.5", spec=SplitSpec())
    rows, _, _ = labelled_rows(records, SplitSpec())
    assert plan["cost_source"] == "measured"
    assert plan["expert_costs"] == pytest.approx({e: measured(rows, e) for e in plan["expert_costs"]}, rel=1e-12)
    costs = plan["expert_costs"]
    assert costs["cot"] > costs["direct"] > 1 and costs["score"] > 1     # tokens, not one unit per expert
    assert plan["full_cost_per_pair"] == pytest.approx(sum(costs.values()))


def test_benchmark_row_reports_measured_tokens(bank):
    from baer_fast.io.splits import SplitSpec
    ca, _, _, records = bank
    spec = SplitSpec()
    row = ca.run_condition("Runtime-test", "tiny", records, spec, "stack",
                           replay=functools.partial(ca.cost_runtime.replay, records))
    test = ca.test_rows(records, spec)
    assert row["costs"] == "measured"
    assert row["full"]["per_pair"] == pytest.approx(sum(measured(test, e) for e in records[0].experts))
    assert row["full"]["decoded"] == pytest.approx(np.mean([r.meta["expert_cost"]["cot"]["decoded"] for r in test]))
    assert row["full"]["decoded"] > 0
    for b in ca.BUDGETS:             # what the runtime runs for a subset: cot_native needs cot's generations
        cell = row[f"pruned_{b}"]
        if "test" in cell:
            assert cell["cost_source"] == "measured"
            run = set(ca.cost_runtime.closure(cell["experts"]))
            assert cell["runs"]["per_pair"] == pytest.approx(sum(measured(test, e) for e in run))
            assert ("cot_native" not in cell["experts"]) or "cot" in run
    c = row["cascade"]
    if "declined" in c:             # dearer than the full head: fit deploys the full head alone
        assert c["exit"] == 0.0 and c["cost"] == 1.0 and c["per_pair"] == row["full"]["per_pair"]
    elif "infeasible" not in c:     # the runtime's own report, replayed: exit fraction and decoded tokens agree
        assert c["runtime_report"]["exit_fraction"] == pytest.approx(c["exit"])
        assert c["runtime_report"]["tokens_decoded_per_pair"] >= c["decoded"] - 1e-9


def test_rerun_reads_the_cache_and_skips_the_model(bank, monkeypatch):
    ca, cache, pairs, records = bank

    def no_model(*a, **k):
        raise AssertionError("the cached signals should have been read")
    monkeypatch.setattr(ca.cost_runtime, "run_bank", no_model)
    again = ca.cost_runtime.runtime_records(cache, pairs=pairs, model_dir="/nonexistent", max_new_tokens=4,
                                            experts=EXPERTS)
    assert [r.to_json() for r in again] == [r.to_json() for r in records]
