"""The O(V) nucleus pick on CPU, compiled by Numba: one row per loop iteration, a few passes.

Same rule as sampling._nucleus (see its module docstring): bucket masses over the top bits of
each fp32 probability locate the top-p cutoff, the candidate buckets around it are sorted, and
the reference's fp32 cumsum there is rebuilt from exact double sums. Returns -1 for a row the
rule cannot decide exactly (the caller runs the reference on it).
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

SHIFT = 17                                  # 6 mantissa bits per bucket
FLOOR = (0x3F800000 - 36 * (1 << 23)) >> SHIFT   # everything below 2^-36 shares bucket 0
TOP = (0x3F800000 >> SHIFT) - FLOOR + 1     # buckets: p <= 1
EXACT_MIN = np.float32(2.0 ** -29)
BAND = 1e-6
MARGIN = 1e-4                               # the reference's fp32 top-K sum vs top_p, decided here beyond this


@njit(cache=True, parallel=True)
def nucleus_pick(probs, top_p, u, k_top, check):
    """probs [s, V] float32, top_p [s] float32, u [s] float64, k_top (the reference's K), check [s]
    bool (rows whose top-K miss to report) -> (ids [s] int64, -1 = undecided; miss [s] int8: 0 no,
    1 the top K hold < top_p, 2 too close to call)."""
    s, v = probs.shape
    ids = np.empty(s, np.int64)
    miss = np.zeros(s, np.int8)
    for r in prange(s):
        ids[r], miss[r] = _row(probs[r], top_p[r], u[r], k_top, check[r])
    return ids, miss


@njit(cache=True)
def _row(p, top_p, u, k_top, check):
    v = p.shape[0]
    keys = np.empty(v, np.int32)
    mass = np.zeros(TOP + 1, np.float64)
    count = np.zeros(TOP + 1, np.int64)
    bits = p.view(np.int32)
    for i in range(v):
        k = (bits[i] >> SHIFT) - FLOOR
        k = 0 if k < 0 else k
        keys[i] = k
        mass[k] += np.float64(p[i])
        count[k] += 1
    lo, hi = np.float64(top_p) - BAND, np.float64(top_p) + BAND
    # walk the buckets from the top: C = mass of the buckets above and including b
    ks, km, c, above_ks = -1, TOP + 1, 0.0, 0.0
    miss = 0
    n_above, kth_done = 0, False
    for b in range(TOP, -1, -1):
        if check and not kth_done and n_above + count[b] >= k_top:
            kth_done = True                 # the K-th largest is in b: top-K mass in [c, c + mass[b]]
            if c + mass[b] < np.float64(top_p) - MARGIN:
                miss = 1
            elif c < np.float64(top_p) + MARGIN:
                miss = 2
        n_above += count[b]
        if c + mass[b] >= lo and ks < 0:
            ks, above_ks = b + 1, c         # buckets >= ks: sure (their mass < top_p - BAND)
        if c <= hi:
            km = b                          # buckets >= km whose mass above is <= top_p + BAND: candidates
        c += mass[b]
    if check and not kth_done and c < np.float64(top_p):
        miss = 1 if c < np.float64(top_p) - MARGIN else 2    # fewer than K tokens: all of them
    if ks < 0:
        ks, above_ks = 0, c                 # the whole vocabulary holds less than top_p - BAND
    km = min(km, ks)
    n_cand = 0
    for b in range(km, ks):
        n_cand += count[b]
    thr = np.float32(np.inf)
    for i in range(v):                      # the smallest sure value
        if keys[i] >= ks and p[i] < thr:
            thr = p[i]
    if n_cand:
        cp = np.empty(n_cand, np.float32)
        j = 0
        for i in range(v):
            if km <= keys[i] < ks:
                cp[j] = p[i]
                j += 1
        cp = -np.sort(-cp)                  # descending
        acc, last, prefix = above_ks, -1, True
        for j in range(n_cand):
            acc += np.float64(cp[j])
            before = np.float32(acc) - cp[j]
            if before < top_p:
                if last != j - 1:
                    prefix = False
                last = j
        if cp[n_cand - 1] < EXACT_MIN or not prefix:
            return -1, miss
        if 0 <= last < n_cand - 1 and cp[last] == cp[last + 1]:
            return -1, miss                 # the cutoff splits a run of ties: the sort's own choice
        if last >= 0:
            thr = cp[last]
    if thr == np.float32(np.inf):
        return -1, miss
    total = 0.0
    for i in range(v):
        if p[i] >= thr:
            total += np.float64(p[i])
    target = u * total
    acc = 0.0
    for i in range(v):
        if p[i] >= thr:
            acc += np.float64(p[i])
            if acc > target or acc >= total:
                return i, miss
    return -1, miss
