"""Masked forwards in width groups: each range of rows attends over its own widest row only.

A masked forward over rows of different lengths (a decode step, a query slice of a prefill)
attends over key columns [0, width); with one width every row scores the widest row's columns.
`plan(widths, penalty)` cuts the rows (in slot order) into at most MAX_GROUPS contiguous ranges
minimising the columns attended plus `penalty` per extra range (an attention call's fixed cost).
The split runs as a registered transformers attention function (`NAME`) wrapping SDPA: the
weights are read once per forward, only the attention is split, and a row's output is the same
in any range up to float rounding. Planning is pure Python; `attention`/`register` import torch
and transformers lazily. The design in full: docs/architecture.md.
"""
from __future__ import annotations

import contextlib
import threading

NAME = "baer_width_groups"
MAX_GROUPS = 8                  # attention calls per layer and step at most
# One more group costs about as many attention scores as this (a further attention call per
# layer: a CPU call's fixed cost is ~1k scores of a small model, a GPU launch ~8k of an 8B model's).
GROUP_SCORES = {"cpu": 1024, "cuda": 8192}
MAX_CUTS = 64                   # cut points a plan considers (rows taken in blocks beyond)

_active = threading.local()


def plan(widths: list[int], penalty: int, max_groups: int = MAX_GROUPS) -> list[tuple[int, int, int]]:
    """widths: columns each row (in slot order) needs -> [(lo, hi, width)] covering [0, n) in
    order, minimising sum((hi - lo) * width) + penalty * (ranges - 1) over at most max_groups
    contiguous ranges (width = the range's widest row).

    An exact dynamic programme over cut points; with more than MAX_CUTS rows the cuts are taken
    at multiples of ceil(n / MAX_CUTS) rows (blocks), so a plan costs O(MAX_CUTS^2 G) whatever n.
    """
    import numpy as np
    n = len(widths)
    if n == 0:
        return []
    step = -(-n // MAX_CUTS)
    w = np.asarray(widths, dtype=np.int64)
    starts = np.arange(0, n, step)
    blocks = np.maximum.reduceat(w, starts)                       # widest row of each block
    edges = np.append(starts, n)
    m, big = len(blocks), np.iinfo(np.int64).max // 4
    i, j = np.arange(m)[:, None], np.arange(m)[None, :]
    span = np.full((m, m), big, dtype=np.int64)                  # span[i, j]: widest of blocks i..j
    for k in range(m):
        span[k, k:] = np.maximum.accumulate(blocks[k:])
    cost = np.where(j >= i, span * (edges[1:][None, :] - edges[:-1][:, None]), big)   # blocks i..j as one range
    dp, back = [cost[0]], [np.zeros(m, dtype=np.int64)]          # dp[g][j]: blocks 0..j in g + 1 ranges
    for _ in range(1, min(max_groups, m)):
        cand = dp[-1][:-1, None] + cost[1:, :]                    # [i - 1, j]: last range blocks i..j
        arg = cand.argmin(0)
        dp.append(np.minimum(cand[arg, np.arange(m)], big))
        back.append(arg + 1)
    total = [int(d[m - 1]) + penalty * g for g, d in enumerate(dp)]
    g = total.index(min(total))
    out, hi = [], m
    while g >= 0:
        lo = int(back[g][hi - 1]) if g else 0
        out.append((int(edges[lo]), int(edges[hi]), int(blocks[lo:hi].max())))
        hi, g = lo, g - 1
    return out[::-1]


def cost(groups: list[tuple[int, int, int]]) -> int:
    """Row columns a step attends over with these ranges."""
    return sum((hi - lo) * width for lo, hi, width in groups)


def best_cost(widths: list[int], penalty: int) -> int:
    """What plan(widths, penalty) minimises, at its minimum: columns attended plus the penalty
    per range beyond the first."""
    groups = plan(widths, penalty)
    return cost(groups) + penalty * (len(groups) - 1)


def group_cost(loaded, split: bool = True, override: int | None = None) -> int | None:
    """Penalty of one more group for `loaded`'s device, in scores (`override` if given), or None
    where its masked calls attend in one width (`split` off, or masked attention not on SDPA)."""
    if not (split and loaded.splits_attention):
        return None
    return GROUP_SCORES.get(loaded.device.type, GROUP_SCORES["cuda"]) if override is None else override


def plan_slice(pasts: list[int], news: list[int], q0: int, q1: int, penalty: int | None):
    """Width groups of the query slice q0..q1 of a masked prefill forward, or None (one width).

    Row r's keys are its past, then its new tokens at their own columns, so its queries in the
    slice need pasts[r] + min(q1, news[r]) columns (its padding queries still see the real past:
    never an empty row). A call's fixed cost is in scores and each row column here costs
    q1 - q0 of them, so the plan's penalty is scaled to row columns of this slice."""
    if penalty is None:
        return None
    groups = plan([p + min(q1, n) for p, n in zip(pasts, news)], max(1, penalty // (q1 - q0)))
    return groups if len(groups) > 1 else None


def slice_scores(groups, rows: int, width: int, q0: int, q1: int) -> int:
    """Attention scores of query slice q0..q1 over `rows` rows: in `groups`, else one `width`."""
    return (q1 - q0) * (cost(groups) if groups else rows * width)


@contextlib.contextmanager
def grouped(groups):
    """Calls under this context that run the NAME attention split by `groups`."""
    before = getattr(_active, "groups", None)
    _active.groups = groups
    try:
        yield
    finally:
        _active.groups = before


def attention(module, query, key, value, attention_mask, **kwargs):
    """SDPA per range of rows, each over its range's own width -> (output [b, q, heads, d], None)."""
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    groups = getattr(_active, "groups", None)
    if not groups or len(groups) == 1 and groups[0][2] >= key.shape[2]:
        return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)
    outs = []
    for lo, hi, width in groups:
        mask = None if attention_mask is None else attention_mask[lo:hi, ..., :width]
        out, _ = sdpa_attention_forward(module, query[lo:hi], key[lo:hi, :, :width], value[lo:hi, :, :width],
                                        mask, **kwargs)
        outs.append(out)
    return torch.cat(outs, 0), None


def register() -> str:
    """Register NAME with transformers' attention functions (idempotent) -> NAME."""
    from transformers import AttentionInterface
    AttentionInterface.register(NAME, attention)
    return NAME
