"""Token choice for the decoder: logits and per-row uniforms in, one token id per row out.

Greedy rows take the argmax; a sampled row the inverse CDF of its temperature/top-p
distribution at its own uniform, walked in token-id order (robust to near-tie order flips).

The nucleus is the reference's: sort the probabilities descending, keep position k while
fp32(cumsum)[k] - p[k] < top_p (CPU cumsum accumulates in double). `pick_tokens` finds that
set without a sort, in O(V) per row: bucket sums over the top bits of each probability locate
the cutoff, and only the one or few buckets around it are sorted. Every probability of at least
2^-29 is a multiple of 2^-52, so while all summed values are that large every partial sum is
exact in double, in any order: the reference's cumsum values are then known without its order.
A row outside that regime (its cutoff among tinier probabilities, as top_p 1.0 may put it), or
whose cutoff splits a run of tied probabilities (which tied ids a sort keeps is its own
choice), takes the reference (`pick_tokens_ref`, the full sort) instead.
"""
from __future__ import annotations

from types import SimpleNamespace

NUCLEUS_TOP_K = 1024        # reference: top-p candidates taken by top-k first; a row whose top-k mass < top_p sorts all
BUCKET_SHIFT = 16           # bucket = fp32 bit pattern >> this (7 mantissa bits: buckets 0.5% apart in value)
BAND = 1e-6                 # |fp32 cumsum - exact sum| < 2^-23: buckets this near the cutoff are sorted
EXACT_MIN = 2.0 ** -29      # fp32 values >= this are multiples of 2^-52: their double sums below 2 are exact


def pick_rows(logits, rows) -> list[int]:
    """pick_tokens for the decoder's rows (.greedy, .temperature, .top_p, .u, .out, .wide): each
    row's settings and next uniform go in as tensors, its sampler memory `wide` comes back."""
    import torch
    dev = logits.device
    if all(r.greedy for r in rows):
        return logits.argmax(-1).tolist()
    temp = torch.tensor([0.0 if r.greedy else r.temperature for r in rows], device=dev)
    top_p = torch.tensor([r.top_p for r in rows], device=dev)
    u = torch.tensor([0.0 if r.greedy else r.u[len(r.out)] for r in rows], dtype=torch.float64, device=dev)
    wide = torch.tensor([r.wide for r in rows], device=dev)
    toks = pick_tokens(logits, temp, top_p, u, wide).tolist()
    for r, w in zip(rows, wide.tolist()):
        r.wide = w
    return toks


def pick_tokens(logits, temperature, top_p, u, wide=None):
    """logits [m, V] fp32; temperature [m] (<= 0: greedy), top_p [m], u [m] float64 uniforms;
    wide [m] bool, updated in place: the reference's memory of rows whose top K held less than
    top_p (it full-sorts them from then on) -> token ids [m] int64. Tensors on the logits'
    device; no host sync unless a row needs the reference."""
    import torch
    out = logits.argmax(-1)
    sampled = (temperature > 0).nonzero()[:, 0]
    if sampled.numel() == 0:
        return out
    probs = torch.softmax(logits[sampled] / temperature[sampled, None].float(), dim=-1)      # [s, V]
    tp, us = top_p[sampled].float(), u[sampled].double()
    was_wide = torch.zeros(len(sampled), dtype=torch.bool, device=logits.device) if wide is None else wide[sampled]
    ids, missed = (_pick_cpu if probs.device.type == "cpu" else _pick_torch)(probs, tp, us, was_wide)
    if bool((ids < 0).any()):
        bad = (ids < 0).nonzero()[:, 0]
        ids[bad] = _ref_pick(probs[bad], tp[bad], us[bad], was_wide[bad])
    out[sampled] = ids
    if wide is not None:
        wide[sampled] = was_wide | missed
    return out


def _pick_cpu(probs, top_p, u, was_wide):
    """The Numba kernel (_nucleus_cpu) -> (ids [s], -1 where undecided; top-K misses [s] bool)."""
    import torch

    from baer_fast.runtime._nucleus_cpu import nucleus_pick
    k = min(NUCLEUS_TOP_K, probs.shape[-1])
    ids, miss = nucleus_pick(probs.contiguous().numpy(), top_p.numpy(), u.numpy(), k, (~was_wide).numpy())
    ids, miss = torch.from_numpy(ids), torch.from_numpy(miss)
    missed = miss == 1
    close = (miss == 2).nonzero()[:, 0]
    if len(close):            # the reference's own fp32 sum decides
        missed[close] = probs[close].topk(k, dim=-1).values.sum(-1) < top_p[close]
    return ids, missed


def _pick_torch(probs, top_p, u, was_wide):
    """The same rule in torch ops (any device) -> (ids [s], -1 where undecided; top-K misses [s])."""
    import torch
    kept, exact, hist = _nucleus(probs, top_p)
    missed = _top_k_misses(probs, top_p, hist) & ~was_wide
    ids = torch.where(exact, _inverse_cdf(kept, u), -1)
    return ids, missed


def _nucleus(probs, top_p):
    """probs [s, V] fp32, top_p [s] fp32 -> (kept [s, V] float64: p where in the nucleus else 0,
    exact [s] bool: whether the row's nucleus is the reference's by construction, the bucket
    histogram (key, mass, above))."""
    import torch
    s, v = probs.shape
    key = (probs.view(torch.int32) >> BUCKET_SHIFT).long()                             # [s, V], monotone in p
    nb = int(1 + (0x3F800000 >> BUCKET_SHIFT))                                         # p <= 1
    p64 = probs.double()
    mass = torch.zeros(s, nb, dtype=torch.float64, device=probs.device).scatter_add_(1, key, p64)
    # above[b]: mass of all buckets above b (exact in the regime that matters; order-free)
    above = mass.flip(1).cumsum(1).flip(1) - mass
    lo, hi = (top_p.double() - BAND)[:, None], (top_p.double() + BAND)[:, None]
    sure = (above + mass < lo).gather(1, key)                                          # every position before top_p
    maybe = ((above <= hi) & (above + mass >= lo)).gather(1, key)                      # near the cutoff: decide exactly
    n_maybe = int(maybe.sum(1).max())
    kept = torch.where(sure, p64, torch.zeros((), dtype=torch.float64, device=probs.device))
    exact = torch.ones(s, dtype=torch.bool, device=probs.device)
    if n_maybe:
        cand_p, cand_i = torch.where(maybe, probs, -1.0).topk(n_maybe, dim=-1)          # [s, c] descending
        real = cand_p >= 0
        top_b = torch.where(maybe, key, -1).max(1, keepdim=True).values.clamp(min=0)
        start = above.gather(1, top_b)                                                   # [s, 1]: the sure tokens' mass
        c64 = torch.where(real, cand_p, 0.0).double()
        before = (start + c64.cumsum(1)).float() - cand_p                       # the reference's cumsum - p
        keep = real & (before < top_p[:, None])
        kept.scatter_(1, cand_i, torch.where(keep, c64, kept.gather(1, cand_i)))
        exact &= torch.where(real, cand_p >= EXACT_MIN, True).all(1)
        # a cutoff inside a run of equal probabilities: which of them a sort keeps is its own choice
        last = keep.sum(1, keepdim=True)                                                 # kept candidates: a prefix
        at = last.clamp(max=n_maybe - 1)
        split = (last > 0) & (last < real.sum(1, keepdim=True)) & \
            (cand_p.gather(1, at) == cand_p.gather(1, (last - 1).clamp(min=0)))
        exact &= ~split[:, 0]
        exact &= ((keep[:, 1:] & ~keep[:, :-1]) & real[:, 1:]).sum(1) == 0              # not a prefix: rounding's own
    return kept, exact, (key, mass, above)


def _top_k_misses(probs, top_p, hist):
    """[s] bool: the reference's test `top-K probabilities sum < top_p` (its switch to a full
    sort), from the histogram where clear by a margin, by the reference's own topk elsewhere."""
    import torch
    key, mass, above = hist
    k = min(NUCLEUS_TOP_K, probs.shape[-1])
    count = torch.zeros_like(mass).scatter_add_(1, key, torch.ones_like(mass[:, :1]).expand_as(key))
    n_above = count.flip(1).cumsum(1).flip(1) - count
    b = ((n_above < k) & (n_above + count >= k)).long().argmax(1, keepdim=True)      # the K-th's bucket
    lo, hi = above.gather(1, b)[:, 0], (above + mass).gather(1, b)[:, 0]              # top-K mass in [lo, hi]
    tp = top_p.double()
    missed = hi < tp - 1e-4
    unsure = ~missed & (lo < tp + 1e-4)
    if bool(unsure.any()):
        rows = unsure.nonzero()[:, 0]
        missed[rows] = probs[rows].topk(k, dim=-1).values.sum(-1) < top_p[rows]
    return missed


def _inverse_cdf(kept, u):
    """kept [s, V] float64 in token-id order, u [s] -> ids [s]: the first id whose cumulative
    kept mass exceeds u x total (zero-width ids skipped; u x total rounding up to the total
    takes the last kept id)."""
    import torch
    cdf = kept.cumsum(-1)
    j = torch.searchsorted(cdf, (u * cdf[:, -1])[:, None], right=True)
    j = torch.minimum(j, (cdf < cdf[:, -1:]).sum(-1, keepdim=True))
    return j[:, 0]


def _ref_pick(probs, top_p, u, wide):
    """The reference's own steps for these rows (top-k first unless wide, full sort on a miss) -> ids [s]."""
    import torch
    rows = [SimpleNamespace(greedy=False, wide=bool(w)) for w in wide.tolist()]
    return torch.tensor(_pick_probs_ref(probs, rows, top_p, u), device=probs.device)


def pick_tokens_ref(logits, rows) -> list[int]:
    """The reference (the sampler before pick_tokens): logits [m, V] fp32, rows with .greedy,
    .temperature, .top_p, .u, .out, .wide -> one token per row. Top-k prefilter, full sort when
    the top K hold less than top_p."""
    import torch
    out = logits.argmax(-1)
    sampled = [k for k, r in enumerate(rows) if not r.greedy]
    if not sampled:
        return out.tolist()
    dev = logits.device
    idx = torch.tensor(sampled, device=dev)
    temp = torch.tensor([rows[k].temperature for k in sampled], device=dev)
    top_p = torch.tensor([rows[k].top_p for k in sampled], device=dev)
    u = torch.tensor([rows[k].u[len(rows[k].out)] for k in sampled], device=dev, dtype=torch.float64)
    probs = torch.softmax(logits[idx] / temp[:, None], dim=-1)                       # [s, V]
    out[idx] = torch.tensor(_pick_probs_ref(probs, [rows[k] for k in sampled], top_p, u), device=dev)
    return out.tolist()


def _pick_probs_ref(probs, rows, top_p, u) -> list[int]:
    """The reference's nucleus and walk over probs [s, V] of rows (their .wide read and set)."""
    import torch
    dev = probs.device
    wide_before = [k for k, r in enumerate(rows) if r.wide]
    narrow = [k for k, r in enumerate(rows) if not r.wide]
    picked = torch.empty(len(rows), dtype=torch.long, device=dev)
    wide = torch.tensor(wide_before, dtype=torch.long, device=dev)
    if narrow:
        nar = torch.tensor(narrow, device=dev)
        p_top, order = probs[nar].topk(min(NUCLEUS_TOP_K, probs.shape[-1]), dim=-1)
        picked[nar] = _nucleus_pick_ref(p_top, order, top_p[nar], u[nar], full=order.shape[-1] == probs.shape[-1])
        missed = nar[p_top.sum(-1) < top_p[nar]]
        for k in missed.tolist():
            rows[k].wide = True
        wide = torch.cat([wide, missed])
    if len(wide):
        p_all, order_all = probs[wide].sort(dim=-1, descending=True)
        picked[wide] = _nucleus_pick_ref(p_all, order_all, top_p[wide], u[wide], full=True)
    return picked.tolist()


def _nucleus_pick_ref(p_sorted, order, top_p, u, full: bool = False):
    """p_sorted [s, K] descending with token ids `order` (full: every id of the vocabulary): keep
    the smallest prefix holding top_p (the top token always stays), pick the token at the
    inverse CDF of u -> ids [s]."""
    import torch
    before = p_sorted.cumsum(-1) - p_sorted
    kept = p_sorted.masked_fill(before >= top_p[:, None], 0.0).double()
    if full:   # a permutation of the whole vocabulary: its inverse, not a second sort
        ids = torch.arange(order.shape[-1], device=order.device).expand_as(order)
        by_id = torch.empty_like(order).scatter_(1, order, ids)
    else:
        ids, by_id = order.sort(dim=-1)
    cdf = kept.gather(1, by_id).cumsum(-1)
    j = torch.searchsorted(cdf, (u * cdf[:, -1])[:, None], right=True)
    j = torch.minimum(j, (cdf < cdf[:, -1:]).sum(-1, keepdim=True))
    return ids.gather(1, j)[:, 0]
