"""Row chunks of one forward, bounded by model FLOPs: the prefix engine's and the decoder's planning.

Pure Python: items in, chunks out; the model's cost enters only as a `FlopModel`.
"""
from __future__ import annotations

from baer_fast.runtime.plan.prefix_tree import causal_scores

PAD_SLACK = 1.25     # a chunk may compute at most 25% more FLOPs than its rows would alone...
PAD_FREE = 64        # ...plus this many tokens' worth, so short suffixes still batch together
QUERY_SLICE = 256    # masked forwards run their new tokens in slices of at most this many queries


def query_slices(n: int) -> list[tuple[int, int]]:
    """Query ranges of a masked forward over n new tokens, at multiples of QUERY_SLICE: a row's
    token lands in the same slice whatever the batch's longest row (fewer batch-dependent sums)."""
    return [(q0, min(q0 + QUERY_SLICE, n)) for q0 in range(0, n, QUERY_SLICE)]


def flop_chunks(items: list, new, past, fm, fits, mask_free=lambda item: False) -> list[list]:
    """Items (rows of new(item) tokens after past(item)) sorted by (new, past) -> consecutive
    chunks, one forward each: an item joins the chunk while `fits(rows, longest new, longest past)`
    and the chunk's model FLOPs (every row through the longest new tokens, its queries over the
    longest past; mask-free only if every item is) stay within PAD_SLACK of its items' own, plus
    PAD_FREE tokens' worth. A token bound alone lets short-past rows pad to a long past. An item
    that fits nowhere is still computed, alone."""
    chunks, cur, n_max, p_max, free, own = [], [], 0, 0, True, 0
    for it in sorted(items, key=lambda it: (new(it), past(it))):
        n, p, f = new(it), past(it), mask_free(it)
        n2, p2, b2, free2 = max(n_max, n), max(p_max, p), len(cur) + 1, free and f
        alone = fm.flops(n, forward_scores(1, n, p, f))
        wasteful = fm.flops(b2 * n2, forward_scores(b2, n2, p2, free2)) > \
            PAD_SLACK * (own + alone) + PAD_FREE * fm.flops(1, p2 + n2)
        if cur and (wasteful or not fits(b2, n2, p2)):
            chunks.append(cur)
            cur, n2, p2, free2, own = [], n, p, f, 0
        cur.append(it)
        n_max, p_max, free, own = n2, p2, free2, own + alone
    return chunks + ([cur] if cur else [])


def forward_scores(b: int, n: int, p: int, mask_free: bool) -> int:
    """Attention scores (per layer and head) a forward over b rows of n new tokens after a past of
    p computes: mask-free, SDPA's causal path skips the upper triangle; masked, each query slice
    is dense over the past and the new tokens up to its own last query."""
    return b * (causal_scores(n) if mask_free else sum((q1 - q0) * (p + q1) for q0, q1 in query_slices(n)))
