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
            assert mirror.experts[name] == t.experts[name], (s.id, name)     # exact (bank/canonical.py)
        assert mirror.meta["len_a"] == t.meta["len_a"] and mirror.meta["tokens_prefilled"] == t.meta["tokens_prefilled"]


def test_derived_fit_is_swap_invariant(loaded):
    pairs = make_pairs(9, seed=8)
    r1, r2 = RunReport(), RunReport()
    run_experts(loaded, pairs, experts=["pride", "calibraeval"], report=r1)
    run_experts(loaded, [p.swapped() for p in pairs], experts=["pride", "calibraeval"], report=r2)
    assert r1.derived_params == r2.derived_params          # bit for bit: the same contents, swapped


def test_identical_responses_give_a_fixed_point_of_the_swap_and_score_exactly_zero(loaded):
    """A pair whose two responses are one text is its own swap. Its two display orders are computed at
    different places in the batch and round differently, so the runs are made a fixed point of the swap
    (bank/canonical.self_mirror): every antisymmetric head then scores it exactly 0."""
    import dataclasses

    from baer_fast.heads.default import DefaultHead

    pairs = make_pairs(4, seed=11)
    same = dataclasses.replace(pairs[0], id="same", response_b=pairs[0].response_a)
    report = RunReport()
    sig = run_experts(loaded, pairs + [same], experts=["direct", "score", "pointwise", "pride"], report=report)
    twin = sig[-1]
    assert twin.swapped().experts == twin.experts
    assert twin.experts["pointwise"] == [0.5]
    head = DefaultHead(sorted(twin.experts))
    assert head.score([twin])[0] == 0.0
