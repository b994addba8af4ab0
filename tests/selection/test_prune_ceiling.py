"""benchmarks/prune_ceiling.py: the test-chosen ceiling for pruning is what its docstring says it is."""
import itertools

import numpy as np
import pytest

from tests.fixtures.checks import import_bench
from tests.selection.cost_synth import bank


@pytest.fixture(scope="module")
def pc():
    return import_bench("prune_ceiling")


def test_exhaustive_ceiling_is_the_best_affordable_subset_on_test(pc):
    """Exhaustive: no affordable subset's stack (any grid lambda, fitted on non-test rows) beats it on
    test, the subset it names reaches it and fits the budget; greedy can only find less; `full` is the
    full stack's own test accuracy (s = 0 at half credit), as cost_accuracy scores it."""
    from baer_fast.artifact import deployed_head
    from baer_fast.heads.stack import LAMBDAS
    from baer_fast.io.splits import SplitSpec
    from baer_fast.selection.budget import expert_costs, fit_scores, subset_cost
    ca = import_bench("cost_accuracy")
    records, spec = bank(160, seed=4), SplitSpec(seed="ceiling-test")
    exh = pc.cell(records, spec, 0.5, max_subsets=10_000)
    greedy = pc.cell(records, spec, 0.5, max_subsets=0)
    assert exh["search"] == "exhaustive" and greedy["search"] == "greedy"
    assert greedy["ceiling"] <= exh["ceiling"] + 1e-12
    test = sorted(ca.test_rows(records, spec), key=lambda r: r.id)
    full_head = deployed_head(ca.stack_art(records, spec, sorted(records[0].experts), "synth"))
    assert exh["full"] == pytest.approx(ca.accuracy(full_head.score(test), test))

    costs, _ = expert_costs(test, sorted(records[0].experts))
    limit = 0.5 * sum(costs.values())
    assert subset_cost(costs, exh["subset"]) <= limit
    # brute force with the library's stack features, independently of the script's loop
    from baer_fast.selection.budget import SubsetCV, labelled_rows
    rows, _, y = labelled_rows(records, spec)
    cats = sorted({r.subset for r in rows})
    both = rows + test
    y_all = np.array([1.0 if r.label == "a" else -1.0 for r in both])
    feats, n = SubsetCV(both, y_all, sorted(records[0].experts), cats, lam=1.0), len(rows)
    ids = [r.id for r in both]
    best = {}
    for k in range(1, len(costs)):
        for sub in itertools.combinations(sorted(costs), k):
            if subset_cost(costs, sub) > limit:
                continue
            phi = feats.phi(list(sub))
            for lam in LAMBDAS:         # each lambda fitted cold, not along the script's warm-started path
                s = fit_scores(phi, y_all, ids, np.arange(n), np.arange(n, len(both)), lam=lam)
                best[sub] = max(best.get(sub, 0.0), ca.accuracy(s, test))
    assert exh["affordable"] == len(best)
    assert exh["ceiling"] == pytest.approx(max(best.values()))
    assert best[tuple(exh["subset"])] == pytest.approx(exh["ceiling"])


def test_no_affordable_subset_is_reported_not_hidden(pc):
    from baer_fast.io.splits import SplitSpec
    out = pc.cell(bank(60, seed=1), SplitSpec(seed="ceiling-test"), 0.01, max_subsets=10)
    assert out["ceiling"] is None and out["affordable"] == 0
