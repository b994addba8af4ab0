"""PrefixEngine.run(keep=...) hands back prompt-prefix KV that a later call takes as given: the later
call reads the same verdicts as computing the prefix itself, and prefills exactly that prefix less."""
import pytest

from baer_fast.bank.generative import pairwise_prefixes
from baer_fast.bank.prompting import PromptEncoder
from baer_fast.bank.queries import build_all_queries
from baer_fast.runtime.config import EngineConfig
from baer_fast.runtime.naive import NaiveEngine
from baer_fast.runtime.plan.prefix_tree import build_tree, tree_tokens
from baer_fast.runtime.prefill import PrefixEngine
from tests.fixtures.tiny_models import make_pairs
from tests.fixtures.tolerances import naive_logprob_error, paths_tol

pytestmark = pytest.mark.usefixtures("poisoned_empty")

CONFIGS = {"one_batch": EngineConfig(), "tiny_budget": EngineConfig(memory_budget_bytes=1 << 16, batch_tokens=400)}


def _groups(loaded, pairs, experts):
    return [q for q, _ in build_all_queries(PromptEncoder.of(loaded), pairs, experts)]


def _max_diff(a, b) -> float:
    return max(abs(x - y) for ga, gb in zip(a, b, strict=True) for qa, qb in zip(ga, gb, strict=True)
               for x, y in zip(qa, qb, strict=True))


@pytest.mark.parametrize("config", CONFIGS.values(), ids=CONFIGS.keys())
def test_kept_prefix_read_by_a_later_call(loaded, config):
    pairs = make_pairs(4, seed=5)
    prefixes = pairwise_prefixes(PromptEncoder.of(loaded), pairs)
    engine = PrefixEngine(loaded, config)
    first = engine.run(_groups(loaded, pairs, ["direct"]), keep=prefixes)
    assert set(first.kept) == {p for ps in prefixes for p in ps}
    for p, (k, v) in first.kept.items():
        assert k.shape[2] == v.shape[2] == len(p)
    later = _groups(loaded, pairs, ["score"])
    given = [[(p, *first.kept[p]) for p in ps] for ps in prefixes]
    got, plain = engine.run(later, given=given), engine.run(later)
    want = NaiveEngine(loaded).run(later)
    tol = paths_tol(naive_logprob_error(loaded, later))
    assert _max_diff(got.logprobs, want.logprobs) <= tol and _max_diff(plain.logprobs, want.logprobs) <= tol
    # exactly the prefixes' tokens (each order's; the two share the pair's [system][question]) are not prefilled
    assert [p - g for p, g in zip(plain.tokens_per_group, got.tokens_per_group)] == \
        [tree_tokens(build_tree(list(ps))) for ps in prefixes]
    assert got.stats.tokens_prefilled == sum(got.tokens_per_group)
    # keeping changes nothing the first call reads
    assert _max_diff(first.logprobs, engine.run(_groups(loaded, pairs, ["direct"])).logprobs) <= tol


def test_only_prefixes_some_query_extends_are_kept(loaded):
    pairs = make_pairs(2, seed=6)
    groups = _groups(loaded, pairs, ["direct"])
    ids = groups[0][0].ids
    stray = tuple(ids[:3]) + ((ids[3] + 1) % len(loaded.tokenizer),)        # leaves the prompts' path
    whole = tuple(ids)                                                        # no query is longer
    got = PrefixEngine(loaded).run(groups, keep=[[stray, whole, ids[:5]], []])
    assert set(got.kept) == {tuple(ids[:5])}


def test_random_trees_keep_and_take_back(loaded):
    """Token-level trees (branch points anywhere, prompts that are prefixes of others, duplicates), kept
    prefixes cut at random lengths of random queries: handed back to the same groups, every verdict
    equals the naive path's, and the call prefills its trees less exactly the kept paths' tokens."""
    import random

    from tests.fixtures.prompts import random_query_groups
    groups = random_query_groups(loaded, seed=4, root_query=lambda g: g % 2 == 1)   # odd: a query ends on every path
    rng = random.Random(4)
    keep = [[q.ids[:rng.randint(1, len(q.ids) - 1)] for q in rng.sample(group, 2)] for group in groups]
    want = NaiveEngine(loaded).run(groups)
    tol = paths_tol(naive_logprob_error(loaded, groups))
    for config in CONFIGS.values():
        engine = PrefixEngine(loaded, config)
        first = engine.run(groups, keep=keep)
        assert set(first.kept) == {p for ps in keep for p in ps}
        given = [[(p, *first.kept[p]) for p in dict.fromkeys(ps)] for ps in keep]
        got = engine.run(groups, given=given)
        assert _max_diff(first.logprobs, want.logprobs) <= tol and _max_diff(got.logprobs, want.logprobs) <= tol
        taken = 0
        for g, group in enumerate(groups):
            # a kept prefix is taken back unless a query ends on its path (that query needs its hidden state)
            used = [p for p in keep[g] if not any(p[:len(q.ids)] == q.ids for q in group)]
            full = tree_tokens(build_tree([q.ids for q in group]))
            assert full - got.tokens_per_group[g] == (tree_tokens(build_tree(used)) if used else 0)
            taken += bool(used)
        assert taken >= 2


def test_waves_plan_within_the_budget_less_what_earlier_waves_kept(loaded):
    """Kept prefix KV outlives its wave: each later wave plans within the KV budget less it (before,
    waves planned within the whole budget while the kept KV piled up beside them)."""
    pairs = make_pairs(8, seed=8)
    groups, kvb = _groups(loaded, pairs, ["direct"]), loaded.kv_bytes_per_token
    one = max(tree_tokens(build_tree([q.ids for q in g])) for g in groups) * kvb
    engine = PrefixEngine(loaded, EngineConfig(memory_budget_bytes=4 * one))    # KV budget: several groups a wave
    real, seen = engine._run_wave, []

    def spy(rows, trees, groups, out, stats, gives=None, keeps=None, kept=None):
        need = kvb * sum(len(trees[g][a].tokens) for g, a in {(r.g, a) for r in rows for a in r.chain})
        seen.append(need + sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in kept.values()))
        return real(rows, trees, groups, out, stats, gives, keeps, kept)
    engine._run_wave = spy
    keep = pairwise_prefixes(PromptEncoder.of(loaded), pairs)[:1] + [[]] * 7     # the first pair's prefixes
    got = engine.run(groups, keep=keep)
    assert len(seen) > 1 and len(got.kept) == 2
    assert max(seen) <= engine.config.kv_budget_bytes
