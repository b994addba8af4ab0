"""The prefix-shared engine reads the same verdicts as one plain forward per full prompt."""

import pytest

from baer_fast import protocols

from baer_fast.runtime.config import EngineConfig
from baer_fast.runtime.prefill import PrefixEngine
from baer_fast.runtime.naive import NaiveEngine
from baer_fast.bank.runner import RunReport, run_experts
from tests.fixtures.tolerances import naive_logprob_error, naive_run_error, paths_tol
from tests.fixtures.prompts import random_query_groups
from tests.fixtures.tiny_models import make_pairs

# every torch.empty float starts as NaN: an unwritten column read anywhere shows up (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("poisoned_empty")

# tolerances: tests/fixtures/tolerances.py (the naive fp32 path's own error vs float64)

# batch compositions: one big batch; tiny token cap (many chunks, different padding);
# a KV budget so small that every pair is its own wave
CONFIGS = {
    "one_batch": EngineConfig(),
    "batch_tokens_48": EngineConfig(batch_tokens=48),
    "tiny_budget": EngineConfig(memory_budget_bytes=1 << 16, batch_tokens=400),
}


def _max_diff(sa, sb) -> float:
    worst = 0.0
    for a, b in zip(sa, sb, strict=True):
        assert a.id == b.id and a.experts.keys() == b.experts.keys()
        for name in a.experts:
            for u, v in zip(a.experts[name], b.experts[name], strict=True):
                worst = max(worst, abs(u - v))
    return worst


@pytest.fixture(scope="module")
def pairs():
    return make_pairs(7, seed=11)


@pytest.mark.parametrize("config", CONFIGS.values(), ids=CONFIGS.keys())
def test_all_experts_match_naive(loaded, pairs, config):
    naive_report, shared_report = RunReport(), RunReport()
    naive = run_experts(loaded, pairs, naive=True, report=naive_report)
    shared = run_experts(loaded, pairs, config=config, report=shared_report,
                         derived_params=naive_report.derived_params)
    assert _max_diff(shared, naive) <= paths_tol(naive_run_error(loaded, pairs, protocols.SINGLE_PASS))
    assert shared_report.tokens_naive == naive_report.stats.tokens_prefilled
    assert shared_report.stats.tokens_prefilled < naive_report.stats.tokens_prefilled
    assert [s.meta["tokens_naive"] for s in shared] == [s.meta["tokens_naive"] for s in naive]


def test_engine_matches_naive_on_random_trees(loaded):
    """Token-level trees with branch points anywhere, prompts that are prefixes of others,
    duplicates, and mixed label sets."""
    groups = random_query_groups(loaded, seed=3)
    want = NaiveEngine(loaded).run(groups)
    tol = paths_tol(naive_logprob_error(loaded, groups))
    for config in CONFIGS.values():
        got = PrefixEngine(loaded, config).run(groups)
        for ga, gb in zip(got.logprobs, want.logprobs):
            for qa, qb in zip(ga, gb):
                assert max(abs(x - y) for x, y in zip(qa, qb)) <= tol
        assert got.stats.tokens_prefilled == sum(got.tokens_per_group)


def test_stock_cache_fallback_matches(loaded, pairs, monkeypatch):
    """Where the in-place cache layer cannot be installed, the stock DynamicCache path is used."""
    import baer_fast.runtime.model.past_cache as past_cache
    want = run_experts(loaded, pairs, experts=["direct", "pointwise"])
    monkeypatch.setattr(past_cache, "inplace_cache", lambda *args, **kwargs: None)
    got = run_experts(loaded, pairs, experts=["direct", "pointwise"])
    assert _max_diff(got, want) <= paths_tol(naive_run_error(loaded, pairs, ["direct", "pointwise"]))
