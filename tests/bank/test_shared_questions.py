"""Pairs that ask the same question (a GRPO group's round robin, MT-Bench-style sets) share one
`[system][question]` prefill in the engine; their runs are what each pair gets alone."""
from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from baer_fast.bank import queries as bank_queries
from baer_fast.bank import runner
from baer_fast.runtime.plan.prefix_tree import build_tree, tree_tokens
from baer_fast.bank.prompting import PromptEncoder
from baer_fast.bank.runner import RunReport, run_experts
from baer_fast.bank.queries import build_queries
from tests.fixtures.tiny_models import make_pairs


def _same_question(n_shared=4):
    base = make_pairs(n_shared + 2, seed=5)
    q = base[0].question
    return [replace(p, question=q) if i < n_shared else p for i, p in enumerate(base)]


def _queries(loaded, pairs):
    enc = PromptEncoder.of(loaded)
    names = runner.protocols.prompt_experts_for(runner.resolve_experts(None))
    return [build_queries(enc, p, names)[0] for p in pairs]


def test_one_question_is_prefilled_once(loaded):
    pairs = _same_question(4)
    report = RunReport()
    together = run_experts(loaded, pairs, report=report)
    groups = _queries(loaded, pairs)
    merged = [q for g in groups[:4] for q in g]
    want = tree_tokens(build_tree([q.ids for q in merged])) + sum(
        tree_tokens(build_tree([q.ids for q in g])) for g in groups[4:])
    assert report.stats.tokens_prefilled == want
    alone_tokens = [tree_tokens(build_tree([q.ids for q in g])) for g in groups]
    assert want < sum(alone_tokens)
    # per-pair meta: the pair's own cost, whatever else shared its batch
    assert [s.meta["tokens_prefilled"] for s in together] == alone_tokens
    for pair, got in zip(pairs, together):
        alone = run_experts(loaded, [pair], derived_params=report.derived_params)[0]
        for name in got.experts:
            assert max(abs(u - v) for u, v in zip(got.experts[name], alone.experts[name])) <= 1e-5


def test_merged_groups_are_capped(loaded, monkeypatch):
    monkeypatch.setattr(bank_queries, "MAX_SHARED_PAIRS", 2)
    pairs = _same_question(5)
    merged, spans = bank_queries.share_questions(pairs, _queries(loaded, pairs))
    assert [g for g, _, _ in spans] == [0, 0, 1, 1, 2, 3, 4]
    assert len(merged) == 5


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_groups_equal_naive_and_each_pair_alone(loaded, poisoned_empty, monkeypatch, data):
    """Pairs drawn from a few questions and a few completions (so they share questions, and
    completions across pairs), under random memory budgets, token caps, merge caps and query
    slices, with every torch.empty poisoned: the
    engine's runs equal the naive path's and each pair's run alone, and each pair's meta keeps
    its own cost."""
    from baer_fast.io.records import Pair
    from baer_fast.runtime.config import EngineConfig
    from tests.fixtures.tiny_models import text_of_tokens
    tok = loaded.tokenizer
    draw = data.draw
    qs = [text_of_tokens(tok, draw(st.integers(1, 60)), draw(st.integers(0, 9999))) for _ in range(draw(st.integers(1, 3)))]
    outs = [text_of_tokens(tok, draw(st.integers(1, 90)), draw(st.integers(0, 9999))) for _ in range(draw(st.integers(2, 4)))]
    picks = draw(st.lists(st.tuples(st.integers(0, len(qs) - 1), st.permutations(range(len(outs)))),
                          min_size=1, max_size=6))
    pairs = [Pair(f"r{k}", qs[q], outs[perm[0]], outs[perm[1]], split="selection") for k, (q, perm) in enumerate(picks)]
    config = EngineConfig(memory_budget_bytes=draw(st.sampled_from([1 << 14, 1 << 18, 2 << 30])),
                          batch_tokens=draw(st.sampled_from([None, 16, 300])), kernels="torch")
    monkeypatch.setattr(bank_queries, "MAX_SHARED_PAIRS", draw(st.sampled_from([1, 2, 16])))
    monkeypatch.setattr("baer_fast.runtime.plan.chunks.QUERY_SLICE", draw(st.sampled_from([7, 32, 256])))
    experts = ["direct", "score", "pointwise"]
    got = run_experts(loaded, pairs, experts=experts, config=config)
    want = run_experts(loaded, pairs, experts=experts, naive=True)
    for pair, g, w in zip(pairs, got, want, strict=True):
        alone = run_experts(loaded, [pair], experts=experts, config=config)[0]
        assert g.meta["tokens_prefilled"] == alone.meta["tokens_prefilled"]
        for name in experts:
            for other in (w, alone):
                assert max(abs(x - y) for x, y in zip(g.experts[name], other.experts[name], strict=True)) <= 1e-5
