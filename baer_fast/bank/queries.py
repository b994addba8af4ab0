"""Queries of the single-pass bank: each pair's prompts as token ids, pairs of one question merged.

Pairs in, engine groups out (and the engine's log-probs back, per pair); knows the protocols'
prompt lists but not what the runs mean.
"""
from __future__ import annotations

from baer_fast import protocols
from baer_fast.io.records import Pair
from baer_fast.runtime.queries import Query


def build_queries(encoder, pair: Pair, prompt_experts: list[str]) -> tuple[list[Query], list[tuple]]:
    """All prompts of one pair as queries, with (expert, key) for each."""
    return build_all_queries(encoder, [pair], prompt_experts)[0]


def build_all_queries(encoder, pairs: list[Pair], prompt_experts: list[str]) -> list[tuple[list[Query], list[tuple]]]:
    """build_queries for every pair, tokenized in one batch."""
    items, where = [], []
    for i, pair in enumerate(pairs):
        for name in prompt_experts:
            for prompt in protocols.get(name).prompts(pair.question, pair.response_a, pair.response_b):
                items.append((prompt, pair.id, name))
                where.append((i, name, prompt.key))
    out = [([], []) for _ in pairs]
    for ids, (prompt, _, _), (i, name, key) in zip(encoder.encode_all(items), items, where):
        out[i][0].append(Query(ids, encoder.label_ids(prompt.labels)))
        out[i][1].append((name, key))
    return out


MAX_SHARED_PAIRS = 16     # pairs of one question per engine group: bounds a group's KV (a wave never splits one)


def share_questions(pairs: list[Pair], groups: list[list[Query]]):
    """Merge the query groups of pairs that ask the same question, so the engine prefills their
    `[system][question]` once (GRPO rounds, MT-Bench-style sets: many pairs per prompt).

    -> (engine groups, spans): pair i's results are engine group spans[i][0], rows
    spans[i][1]:spans[i][2]. At most MAX_SHARED_PAIRS pairs per merged group.
    """
    merged, members, spans, open_group = [], [], [], {}
    for pair, group in zip(pairs, groups):
        g = open_group.get(pair.question)
        if g is None or members[g] >= MAX_SHARED_PAIRS:
            g = open_group[pair.question] = len(merged)
            merged.append([])
            members.append(0)
        spans.append((g, len(merged[g]), len(merged[g]) + len(group)))
        merged[g].extend(group)
        members[g] += 1
    return merged, spans


def run_shared(engine, pairs: list[Pair], groups: list[list[Query]], given=None, store=None):
    """engine.run over one query group per pair, pairs of one question merged (share_questions)
    -> (per pair: its queries' log-probs in order, the call's EngineStats). given: per pair,
    handed-in prefix KV for the engine (PrefixEngine.run), merged with the pairs. store: a
    PrefixStore (bank/prefix_store.py): its prefixes are handed in, and the ones it wants kept."""
    merged, spans = share_questions(pairs, groups)
    kw = {}
    if store is not None:
        given = [list(g or ()) + s for g, s in zip(given or [None] * len(pairs), store.given(pairs))]
        kw["keep"] = _merged(spans, len(merged), store.wanted(pairs))
    if given is not None and any(given):
        kw["given"] = _merged(spans, len(merged), given)
    result = engine.run(merged, **kw)
    if store is not None:
        store.add(result.kept)
    return [result.logprobs[g][lo:hi] for g, lo, hi in spans], result.stats


def _merged(spans, n: int, per_pair: list) -> list[list]:
    out = [[] for _ in range(n)]
    for (g, _, _), mine in zip(spans, per_pair):
        out[g].extend(mine)
    return out
