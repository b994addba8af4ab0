"""benchmarks/prune_pooled.py: pooling over backbones changes only how subsets are ranked."""
from dataclasses import replace

from tests.fixtures.checks import import_bench
from tests.selection.cost_synth import ACCURACY, bank


def test_one_backbone_is_the_plain_search_and_a_twin_backbone_changes_nothing():
    pp = import_bench("prune_pooled")
    records = bank(150, seed=2)
    own = pp.split_cells("B", {"x": records}, 0, 1 / 3)[0]
    assert own["pooled"] == own["own"]
    # a second backbone that judged the same pairs alike pools the same figures, so makes the same choice
    two = pp.split_cells("B", {"x": records, "y": [replace(r) for r in records]}, 0, 1 / 3)
    assert two[0]["own"] == own["own"] and two[0]["pooled"]["experts"] == own["own"]["experts"]


def test_pooled_figures_weight_each_backbone_by_its_rows():
    pp = import_bench("prune_pooled")
    from baer_fast.io.splits import SplitSpec
    from baer_fast.selection.budget import subset_cv_for
    a, b = bank(120, seed=3), bank(240, seed=5, accuracy={**ACCURACY, "cheap": 0.6})
    cva = subset_cv_for(a, SplitSpec(), sorted(a[0].experts))[0]
    cvb = subset_cv_for(b, SplitSpec(), sorted(b[0].experts))[0]
    pooled = pp.PooledCV(cva, [(cva, set(cva.index)), (cvb, set(cvb.index))])
    (acc_a, loss_a), (acc_b, loss_b) = cva.figures(["cheap"]), cvb.figures(["cheap"])
    na, nb = len(cva.y), len(cvb.y)
    assert pooled.figures(["cheap"]) == (round((na * acc_a + nb * acc_b) / (na + nb), 9),
                                         round((na * loss_a + nb * loss_b) / (na + nb), 9))
    assert pooled.gap(["cheap"]) == cva.gap(["cheap"])
