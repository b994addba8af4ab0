"""Sibling packing: several tree nodes in one batch row under a tree mask equal plain forwards.

The trees here are built so the planner really packs (asserted on the plan), including inner
siblings whose own children come in later rows, siblings of very different lengths, forests,
and budgets that force one parent's siblings apart.
"""
import random

import pytest

from baer_fast.runtime.config import EngineConfig
from baer_fast.runtime.prefill import PrefixEngine
from baer_fast.runtime.naive import NaiveEngine
from baer_fast.runtime.plan.prefix_tree import build_tree, common_prefix, tree_tokens
from baer_fast.runtime.queries import Query
from tests.fixtures.checks import prefix_kv as _prefix_kv

# every torch.empty float starts as NaN: an unwritten column read anywhere shows up (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("poisoned_empty")

TOL = 1e-5


def _assert_equal(loaded, groups, config):
    want = NaiveEngine(loaded).run(groups)
    got = PrefixEngine(loaded, config).run(groups)
    for ga, gb in zip(got.logprobs, want.logprobs, strict=True):
        for qa, qb in zip(ga, gb, strict=True):
            assert max(abs(x - y) for x, y in zip(qa, qb, strict=True)) <= TOL
    trees = [build_tree([q.ids for q in g]) for g in groups]
    assert got.stats.tokens_prefilled == sum(tree_tokens(t) for t in trees) == sum(got.tokens_per_group)
    assert got.stats.tokens_computed >= got.stats.tokens_prefilled
    return got


def _plan(loaded, groups, config):
    engine = PrefixEngine(loaded, config)
    return [r for g, group in enumerate(groups) for r in engine._plan(g, build_tree([q.ids for q in group]))]


def _toks(rng, vocab, k):
    return [rng.randrange(10, vocab) for _ in range(k)]


def _skeleton_groups(loaded, n_groups=3, seed=0):
    """Long root, then per group: short inner siblings with their own leaves, a long leaf, a 1-token
    inner sibling (two suffixes sharing a first token), and a prompt ending inside the tree."""
    rng = random.Random(seed)
    vocab = len(loaded.tokenizer)
    groups = []
    for _ in range(n_groups):
        root = _toks(rng, vocab, rng.randint(30, 60))
        seqs = [root]
        for _ in range(2):                                         # two "orders"
            mid = root + _toks(rng, vocab, rng.randint(20, 80))
            for k in range(rng.randint(2, 4)):                     # short suffixes
                seqs.append(mid + _toks(rng, vocab, rng.randint(3, 9)))
            shared = mid + _toks(rng, vocab, 1)                    # 1-token inner sibling
            seqs += [shared + _toks(rng, vocab, rng.randint(2, 7)) for _ in range(2)]
            inner = mid + _toks(rng, vocab, 4)                     # short inner sibling with leaves
            seqs += [inner, inner + _toks(rng, vocab, 5), inner + _toks(rng, vocab, 11)]
            seqs.append(mid + _toks(rng, vocab, rng.randint(60, 90)))   # very long sibling
        groups.append([Query(tuple(s), tuple(rng.sample(range(vocab), 2))) for s in seqs])
    return groups


def test_skeleton_packs_and_matches_naive(loaded):
    groups = _skeleton_groups(loaded)
    rows = _plan(loaded, groups, EngineConfig())
    assert any(len(r.nodes) > 1 for r in rows)                   # packing happened
    # an inner sibling whose children are computed in the same row (whole subtree packed)
    assert any(r.ends[0] > r.offs[0] + r.lens[0] for r in rows)
    got = _assert_equal(loaded, groups, EngineConfig())
    naive_rows = sum(len(build_tree([q.ids for q in g])) for g in groups)
    assert got.stats.forwards < naive_rows


@pytest.mark.parametrize("batch_tokens", [12, 24, 40])
def test_token_cap_splits_siblings_across_rows(loaded, batch_tokens):
    groups = _skeleton_groups(loaded, seed=1)
    config = EngineConfig(batch_tokens=batch_tokens)
    rows = _plan(loaded, groups, config)
    packed = [r for r in rows if len(r.nodes) > 1]
    assert packed and all(r.n <= batch_tokens for r in packed)
    by_parent = {}
    for r in rows:
        by_parent.setdefault((r.g, tuple(r.chain)), []).append(r)
    assert any(len(rs) > 1 and any(len(r.nodes) > 1 for r in rs) for rs in by_parent.values())
    _assert_equal(loaded, groups, config)


@pytest.mark.parametrize("budget", [1 << 16, 3 << 19, 1 << 21])
def test_memory_budgets_bound_packed_rows(loaded, budget):
    groups = _skeleton_groups(loaded, seed=2)
    config = EngineConfig(memory_budget_bytes=budget)
    engine = PrefixEngine(loaded, config)
    for r in _plan(loaded, groups, config):
        if len(r.nodes) > 1:
            assert engine._cost(1, r.n, r.past) <= config.activation_budget_bytes
    _assert_equal(loaded, groups, config)


def test_forest_and_deep_random_trees(loaded):
    """Random token trees up to five levels deep, several roots per group, duplicates, prompts
    that are prefixes of others; every batch composition."""
    rng = random.Random(7)
    vocab = len(loaded.tokenizer)
    groups = []
    for _ in range(6):
        seqs = []
        for _ in range(rng.randint(1, 3)):                         # roots (a forest when > 1)
            frontier = [_toks(rng, vocab, rng.randint(1, 40))]
            for _ in range(rng.randint(1, 4)):
                frontier = [f + _toks(rng, vocab, rng.choice([1, 2, 5, 30])) for f in frontier
                            for _ in range(rng.randint(1, 3))][:12]
                seqs += rng.sample(frontier, k=max(1, len(frontier) // 2))
            seqs += frontier
        seqs.append(seqs[0])
        groups.append([Query(tuple(s), tuple(rng.sample(range(vocab), 3))) for s in seqs])
    assert any(len(r.nodes) > 1 for r in _plan(loaded, groups, EngineConfig()))
    for config in (EngineConfig(), EngineConfig(batch_tokens=16), EngineConfig(batch_tokens=64),
                   EngineConfig(memory_budget_bytes=1 << 20), EngineConfig(memory_budget_bytes=1 << 16, batch_tokens=400)):
        _assert_equal(loaded, groups, config)


def test_single_prompt_and_single_token_groups(loaded):
    groups = [[Query((11,), (5, 6))], [Query((11, 12), (5, 6)), Query((11, 13), (5, 6)), Query((11,), (5, 6))]]
    _assert_equal(loaded, groups, EngineConfig())


@pytest.mark.parametrize("one_scatter", [None, True], ids=["row-copies", "one-scatter"])
@pytest.mark.parametrize("query_slice", [1, 5, 17])
def test_query_slices_match_naive(loaded, monkeypatch, query_slice, one_scatter):
    """Masked forwards run their queries in slices sharing one growing cache; with tiny slices
    every slice boundary falls inside nodes, packed rows and padding. `one-scatter` writes new
    KV with the GPU's single indexed write (past_cache.ONE_SCATTER), here on CPU."""
    import baer_fast.runtime.model.past_cache as past_cache
    monkeypatch.setattr("baer_fast.runtime.plan.chunks.QUERY_SLICE", query_slice)
    monkeypatch.setattr(past_cache, "ONE_SCATTER", one_scatter)
    groups = _skeleton_groups(loaded, n_groups=2, seed=3)
    got = _assert_equal(loaded, groups, EngineConfig())
    got_capped = _assert_equal(loaded, groups, EngineConfig(batch_tokens=30))
    assert got.stats.tokens_prefilled == got_capped.stats.tokens_prefilled


def test_query_slices_with_stock_cache(loaded, monkeypatch):
    import baer_fast.runtime.model.past_cache as past_cache
    monkeypatch.setattr("baer_fast.runtime.plan.chunks.QUERY_SLICE", 7)
    monkeypatch.setattr(past_cache, "inplace_cache", lambda *args, **kwargs: None)
    _assert_equal(loaded, _skeleton_groups(loaded, n_groups=2, seed=4), EngineConfig())



@pytest.mark.parametrize("one_scatter", [None, True], ids=["row-copies", "one-scatter"])
@pytest.mark.parametrize("query_slice", [7, 256])
def test_no_unwritten_column_is_read(loaded, monkeypatch, query_slice, one_scatter):
    """Rows of one forward with pasts of different lengths, in query slices (a reward loop's group:
    one question, completions shared across pairs): the columns a later slice of a shorter-past
    row writes, and those past a row's room, must not hold garbage while earlier slices run."""
    from baer_fast.runtime.model import past_cache
    from baer_fast.bank.runner import run_experts
    from tests.fixtures.tiny_models import completion_pairs
    monkeypatch.setattr("baer_fast.runtime.plan.chunks.QUERY_SLICE", query_slice)
    monkeypatch.setattr(past_cache, "ONE_SCATTER", one_scatter)
    pairs = completion_pairs(loaded.tokenizer, 60, (40, 90, 15, 120))
    experts = ["direct", "score", "pointwise"]
    got = run_experts(loaded, pairs, experts=experts)
    want = run_experts(loaded, pairs, experts=experts, naive=True)
    for g, w in zip(got, want, strict=True):
        for name in experts:
            assert max(abs(x - y) for x, y in zip(g.experts[name], w.experts[name], strict=True)) <= TOL


def test_past_copies_do_not_scale_with_layers(loaded, monkeypatch):
    """Writing a forward's past and keeping new KV issue one copy per (row, ancestor) and one clone
    per kept node for K and V each, for all layers at once: on a GPU every op is a launch."""
    from torch.utils._python_dispatch import TorchDispatchMode

    import baer_fast.runtime.prefill as engine_mod

    class Count(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = {}

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = func.overloadpacket.__name__
            self.ops[name] = self.ops.get(name, 0) + 1
            return func(*args, **(kwargs or {}))

    seen = {"copy": 0, "clone": 0, "want_copy": 0, "want_clone": 0}
    gather, keep = engine_mod.PrefixEngine._gather_past, engine_mod.PrefixEngine._keep_kv

    def counted_gather(self, rows, kv, p, room):
        with Count() as c:
            out = gather(self, rows, kv, p, room)
        if p:
            seen["copy"] += c.ops.get("copy_", 0)
            seen["want_copy"] += 2 * sum(len(r.chain) for r in rows)
        return out

    def counted_keep(self, rows, cache, big, new_at, kv, last_use):
        before = set(kv)
        with Count() as c:
            keep(self, rows, cache, big, new_at, kv, last_use)
        if big is not None:
            seen["clone"] += c.ops.get("clone", 0)
            seen["want_clone"] += 2 * len(set(kv) - before)
        return None

    monkeypatch.setattr(engine_mod.PrefixEngine, "_gather_past", counted_gather)
    monkeypatch.setattr(engine_mod.PrefixEngine, "_keep_kv", counted_keep)
    _assert_equal(loaded, _skeleton_groups(loaded, n_groups=2, seed=5), EngineConfig())
    assert loaded.model.config.num_hidden_layers > 1
    assert seen["want_copy"] > 0 and seen["copy"] == seen["want_copy"]
    assert seen["want_clone"] > 0 and seen["clone"] == seen["want_clone"]


def test_rows_of_real_pairs_are_not_padded_to_each_others_pasts(loaded):
    """The bank on 16 LLMBar pairs (the demo's sample): questions and responses of every length,
    so a level holds rows of similar length over very different pasts. Chunked by token count
    alone, short-past rows computed their scores over the chunk's longest past (1.86x the least
    any exact engine computes, on the tiny Qwen3); chunks bounded by FLOPs compute 1.36x; with
    each query slice in width groups, 1.21x. Same log-probs either way (and naive's)."""
    from baer_fast.runtime.plan.prefix_tree import tree_scores
    from tests.fixtures.checks import sample_bank_groups
    groups = sample_bank_groups(loaded, 16)
    least = sum(tree_scores(build_tree([q.ids for q in g])) for g in groups)
    one_width = _assert_equal(loaded, groups, EngineConfig(split_attention=False))
    assert one_width.stats.scores_computed <= 1.5 * least
    got = _assert_equal(loaded, groups, EngineConfig())
    assert got.stats.scores_computed <= 1.25 * least < one_width.stats.scores_computed
    assert (got.stats.tokens_computed, got.stats.forwards) == (one_width.stats.tokens_computed, one_width.stats.forwards)
    for ga, gb in zip(got.logprobs, one_width.logprobs):
        for qa, qb in zip(ga, gb):
            assert max(abs(x - y) for x, y in zip(qa, qb)) <= 1e-6


def test_a_forward_refusing_width_groups_reruns_in_one_width(loaded, refused_width_groups, caplog):
    """Remote code that knows none of our attention names: the chunk that failed reruns whole in
    one width (a fresh cache), the engine stays in one width, and every log-prob is naive's."""
    from tests.fixtures.checks import sample_bank_groups
    groups = sample_bank_groups(loaded, 4)
    got = _assert_equal(loaded, groups, EngineConfig())
    assert "masked forwards in one width" in caplog.text
    one_width = PrefixEngine(loaded, EngineConfig(split_attention=False)).run(groups)
    assert got.stats.scores_computed == one_width.stats.scores_computed


def test_handed_in_prefix_kv_is_not_recomputed(loaded):
    """KV handed in for a prefix (the decoder's prefill of a pair's [system][question][A][B]):
    the nodes it covers are not computed, a prefix ending inside a node splits it, and the
    verdicts still equal plain forwards. A prefix on which a query ends is not used (that query's
    verdict needs the hidden state): its nodes are computed as usual."""
    groups = _skeleton_groups(loaded, n_groups=3, seed=6)
    groups[0], groups[1] = groups[0][1:], groups[1][1:]           # no query ends at the root
    common = [g[0].ids[:common_prefix(g[0].ids, g[1].ids)] for g in groups]    # root + one order's [A][B]
    given = [[(common[0][:-5], *_prefix_kv(loaded, common[0][:-5]))],     # ends inside a node
             [(common[1], *_prefix_kv(loaded, common[1])), ((1, 2, 3), *_prefix_kv(loaded, (1, 2, 3)))],
             [(common[2], *_prefix_kv(loaded, common[2]))]]      # the root query ends on its path
    want = NaiveEngine(loaded).run(groups)
    got = PrefixEngine(loaded).run(groups, given=given)
    for ga, gb in zip(got.logprobs, want.logprobs, strict=True):
        for qa, qb in zip(ga, gb, strict=True):
            assert max(abs(x - y) for x, y in zip(qa, qb, strict=True)) <= TOL
    full = [tree_tokens(build_tree([q.ids for q in g])) for g in groups]
    assert got.tokens_per_group == [full[0] - len(common[0]) + 5, full[1] - len(common[1]), full[2]]
    assert got.stats.tokens_prefilled == sum(got.tokens_per_group)

