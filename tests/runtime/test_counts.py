"""Exact token accounting: shared vs naive prefill, from the token ids alone (no forward).

The independent count of a prefix-shared prefill is the number of distinct non-empty token
prefixes over a pair's prompts; the naive count is the sum of prompt lengths.
"""
import pytest

from baer_fast import protocols
from baer_fast.io.records import Pair
from baer_fast.protocols.base import ORDERS, Prompt, pairwise_segments
from baer_fast.runtime.prefill import PrefixEngine
from baer_fast.runtime.naive import NaiveEngine
from baer_fast.bank.prompting import PromptEncoder
from baer_fast.runtime.queries import Query
from baer_fast.bank.runner import RunReport, run_experts
from baer_fast.bank.queries import build_queries
from tests.fixtures.checks import BANK_ROW
from tests.fixtures.tiny_models import completion_pairs, text_of_tokens


def _prefixes(seqs) -> set:
    return {tuple(s[:k]) for s in seqs for k in range(1, len(s) + 1)}


def distinct_prefixes(seqs) -> int:
    return len(_prefixes(seqs))


def distinct_scores(seqs) -> int:
    """Attention scores when every distinct prefix is computed once: its last token sees the whole prefix."""
    return sum(len(p) for p in _prefixes(seqs))


@pytest.fixture(scope="module")
def encoder(qwen_dir, loaded_models):
    m = loaded_models(qwen_dir)
    return PromptEncoder(m.tokenizer, model_name="qwen3-tiny", context_len=1 << 20)


def _bank_queries(encoder, q=300, a=500, b=500):
    tok = encoder.tok
    pair = Pair("x", text_of_tokens(tok, q, 1), text_of_tokens(tok, a, 2), text_of_tokens(tok, b, 3))
    queries, _ = build_queries(encoder, pair, protocols.prompt_experts_for(BANK_ROW))
    return [qr.ids for qr in queries]


def test_fixed_prompt_set_exact_counts(loaded_models, qwen_dir):
    m = loaded_models(qwen_dir)
    enc = PromptEncoder(m.tokenizer, model_name="tiny", context_len=m.context_len)
    pairs = [Pair("p", "Add 2 and 3.", "5", "It is 6."), Pair("q", "Name a prime.", "7 is prime.", "9")]
    groups = [build_queries(enc, p, ["direct", "score", "pointwise"])[0] for p in pairs]
    shared, naive = PrefixEngine(m).run(groups), NaiveEngine(m).run(groups)
    for group, s, n in zip(groups, shared.tokens_per_group, naive.tokens_per_group):
        ids = [qr.ids for qr in group]
        assert s == distinct_prefixes(ids)
        assert n == sum(len(i) for i in ids)
    assert shared.stats.tokens_prefilled == sum(distinct_prefixes([q.ids for q in g]) for g in groups)
    assert naive.stats.tokens_prefilled == sum(len(q.ids) for g in groups for q in g)


def test_single_pass_bank_at_q300_a500(encoder, loaded_models, qwen_dir):
    ids = _bank_queries(encoder)
    shared, naive = distinct_prefixes(ids), sum(len(i) for i in ids)
    from baer_fast.runtime.plan.prefix_tree import build_tree, tree_tokens
    assert tree_tokens(build_tree(ids)) == shared
    # the engine itself prefills exactly that minimum, and the naive path every prompt whole
    group = [Query(i, (0, 1)) for i in ids]
    m = loaded_models(qwen_dir)
    assert PrefixEngine(m).run([group]).stats.tokens_prefilled == shared
    assert NaiveEngine(m).run([group]).stats.tokens_prefilled == naive
    # 8 prompts per pair (direct x2, score x4, pointwise x2): 6 see both responses, 2 see one.
    # Every response is prefilled once per order it leads, so ~2,000 + 300 + 8 short suffixes.
    # That floor, [system][question] + both orders' [A][B] (~2,350 tokens), bounds any exact KV
    # reuse of this bank at ~4.4x; the measured ratio is 3.85x (10,424 -> 2,708).
    assert shared < 300 + 2 * 1000 + 8 * 120
    assert naive / shared >= 3.8


def test_reward_loop_group_shares_completions_across_pairs(encoder, loaded_models, qwen_dir):
    """k completions of one prompt, all k(k-1)/2 pairs, the single-pass bank: pairs that ask the
    same question share one tree, so [system][question] is prefilled once per group and each
    completion once per display slot it leads in, not once per pair."""
    m = loaded_models(qwen_dir)
    pairs = completion_pairs(encoder.tok, 300, (500,) * 4)
    report = RunReport()
    run_experts(m, pairs, experts=list(BANK_ROW), report=report)
    names = protocols.prompt_experts_for(BANK_ROW)
    ids = [q.ids for p in pairs for q in build_queries(encoder, p, names)[0]]
    assert report.stats.tokens_prefilled == distinct_prefixes(ids)
    assert report.tokens_naive == sum(len(i) for i in ids)
    # measured: 10,424 -> 1,664 tokens per pair (6.3x), against 2,708 for a pair alone
    assert report.tokens_naive / report.stats.tokens_prefilled >= 6.0


def test_design_skeleton_18_suffixes_is_8x(encoder):
    """DESIGN.md's figure: [system][question] shared, [A][B] per order, 9 suffixes per order."""
    tok = encoder.tok
    q, a, b = (text_of_tokens(tok, n, s) for n, s in ((300, 1), (500, 2), (500, 3)))
    instr = [text_of_tokens(tok, 40, 10 + k) for k in range(9)]
    prompts = [Prompt(f"{o}/{k}", pairwise_segments(q, a, b, o, instr[k]), ("A", "B"))
               for o in ORDERS for k in range(9)]
    ids = [encoder.encode(p, pair_id="x", expert="skeleton") for p in prompts]
    shared, naive = distinct_prefixes(ids), sum(len(i) for i in ids)
    assert naive / shared >= 8.0


@pytest.mark.parametrize("which", ["qwen_dir", "llama_dir"])
def test_batched_tokenization_equals_one_call_per_prompt(which, request, loaded_models):
    """encode_all tokenizes a batch in one call; each prompt's ids must be what it gets alone."""
    m = loaded_models(request.getfixturevalue(which))
    enc = PromptEncoder(m.tokenizer, model_name="tiny", context_len=1 << 20)
    pairs = [Pair("p", "Add 2 and 3.", "5", "It is 6.\n\n"), Pair("q", "Name a prime. ", " 7 is prime.", "9 \n"),
             Pair("r", "é\u00a0ü?", "  ", "\t\tx")]
    items = [(pr, p.id, name) for p in pairs for name in protocols.PROMPT_EXPERTS
             for pr in protocols.get(name).prompts(p.question, p.response_a, p.response_b)]
    alone = [tuple(m.tokenizer(enc.render(pr), add_special_tokens=False)["input_ids"]) for pr, _, _ in items]
    assert enc.encode_all(items) == alone
    assert [enc.encode(pr, pair_id=i, expert=n) for pr, i, n in items] == alone


def test_single_pass_bank_flop_ceiling_below_4x(encoder, loaded_models, qwen_dir):
    """What bounds pairs/s: at q=300, a=b=500 the naive path's tokens and attention scores are both
    under 4x the least any exact prefix-sharing engine computes, so its FLOP ratio is under 4x for
    every model shape (FLOPs are a positive sum of the two). The engine computes the least tokens
    and, with its query slices and packed rows, a few percent more scores than the least."""
    from baer_fast.runtime.plan.prefix_tree import build_tree, causal_scores, tree_scores
    ids = _bank_queries(encoder)
    least_tokens, least_scores = distinct_prefixes(ids), distinct_scores(ids)
    assert tree_scores(build_tree(ids)) == least_scores
    group = [Query(i, (0, 1)) for i in ids]
    m = loaded_models(qwen_dir)
    shared, naive = PrefixEngine(m).run([group]).stats, NaiveEngine(m).run([group]).stats
    assert naive.scores_computed == sum(causal_scores(len(i)) for i in ids)
    assert least_scores <= shared.scores_computed <= 1.15 * least_scores
    # measured: tokens 3.849x, scores 3.094x; the engine's scores 1.123x the least
    token_ratio, score_ratio = naive.tokens_computed / least_tokens, naive.scores_computed / least_scores
    assert 3.8 < token_ratio < 4 and score_ratio < token_ratio
