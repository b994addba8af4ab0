"""Candidate symmetry: runs on the swapped pair mirror the runs on the pair."""
from baer_fast.bank.runner import RunReport, run_experts
from tests.fixtures.tiny_models import make_pairs


def test_swapped_pairs_give_mirrored_runs(loaded):
    pairs = make_pairs(6, seed=5)
    report = RunReport()
    sig = run_experts(loaded, pairs, report=report)
    # a different batch composition on purpose: swapped pairs run in reverse order
    swapped = run_experts(loaded, [p.swapped() for p in reversed(pairs)], derived_params=report.derived_params)
    for s, t in zip(sig, reversed(swapped)):
        mirror = s.swapped()
        assert mirror.experts.keys() == t.experts.keys()
        for name in t.experts:
            for u, v in zip(mirror.experts[name], t.experts[name], strict=True):
                assert abs(u - v) <= 1e-6, (s.id, name)
        assert mirror.meta["len_a"] == t.meta["len_a"] and mirror.meta["tokens_prefilled"] == t.meta["tokens_prefilled"]


def test_derived_fit_is_swap_invariant(loaded):
    pairs = make_pairs(9, seed=8)
    r1, r2 = RunReport(), RunReport()
    run_experts(loaded, pairs, experts=["pride", "calibraeval"], report=r1)
    run_experts(loaded, [p.swapped() for p in pairs], experts=["pride", "calibraeval"], report=r2)
    assert abs(r1.derived_params["pride"]["prior"][0] - r2.derived_params["pride"]["prior"][0]) < 1e-6
