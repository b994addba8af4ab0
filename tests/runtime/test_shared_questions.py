"""Pairs that ask the same question (a GRPO group's round robin, MT-Bench-style sets) share one
`[system][question]` prefill in the engine; their runs are what each pair gets alone."""
from dataclasses import replace

from baer_fast.runtime import runner
from baer_fast.runtime.prefix_tree import build_tree, tree_tokens
from baer_fast.runtime.prompting import PromptEncoder
from baer_fast.runtime.runner import RunReport, build_queries, run_experts
from tests.fixtures.tiny_models import make_pairs


def _same_question(n_shared=4):
    base = make_pairs(n_shared + 2, seed=5)
    q = base[0].question
    return [replace(p, question=q) if i < n_shared else p for i, p in enumerate(base)]


def _queries(loaded, pairs):
    enc = PromptEncoder(loaded.tokenizer, model_name=loaded.name, context_len=loaded.context_len)
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
    monkeypatch.setattr(runner, "MAX_SHARED_PAIRS", 2)
    pairs = _same_question(5)
    merged, spans = runner.share_questions(pairs, _queries(loaded, pairs))
    assert [g for g, _, _ in spans] == [0, 0, 1, 1, 2, 3, 4]
    assert len(merged) == 5
