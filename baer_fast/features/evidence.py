"""Signed evidence per expert (paper Eq. 3-5): the numpy reference for the fused kernel.

Runs in, features out; knows nothing about files, heads or labels.

    p_k  = mean of the non-missing runs u_km        (all missing -> 0.5)
    d_k  = max_m u_km - min_m u_km                  (all missing -> 0)
    z_k  = logit(clip(p_k, EPS, 1 - EPS))
    zt_k = z_k / (1 + 4 d_k)

Clipping is symmetric and hard 0/1 decisions stay finite (|z| <= logit(1 - EPS) = 6.9068).
The mean is taken of the centred runs u - 1/2, each display-order pair summed first: on runs
snapped to 2^-53 (protocols.base.snap; runs_tensor snaps runs from elsewhere, as a published
judge's 0.190333, whose swap 1 - u rounds) a swap negates every centred run exactly and only
exchanges the two members of a pair, so z, zt and phi negate bit for bit and delta is unchanged.
"""
from __future__ import annotations

import itertools
from typing import Sequence

import numpy as np

from baer_fast.kernels.constants import EPS   # p is clipped to [EPS, 1-EPS]; stored in artifacts


class MemoRecords(list):
    """Records (a plain list of them) whose runs tensor and run counts are built once per expert list:
    `eval` reads them in about ten places. Do not change the list once read (the memo would be stale)."""

    def __init__(self, records: Sequence = ()):
        super().__init__(records)
        self.runs_memo: dict = {}


GRID = float(1 << 53)     # runs on multiples of 2^-53, where 1 - u is exact (as protocols.base.snap)


def runs_tensor(records: Sequence, experts: Sequence[str]) -> np.ndarray:
    """Stack the runs of `experts` into u [N, K, M] float64 on the 2^-53 grid, NaN where missing or absent."""
    return _runs(records, experts)[0]


def run_counts(records: Sequence, experts: Sequence[str]) -> np.ndarray:
    """[N, K] int: how many runs (null ones included) each record lists for each expert; 0 when absent."""
    return _runs(records, experts)[1]


def memoized(records: Sequence, key: tuple, make):
    """make() (an array, or a tuple of them), kept read-only in the records' memo when they have one
    (MemoRecords); computed afresh for a plain list."""
    memo = getattr(records, "runs_memo", None)
    if memo is None:
        return make()
    if key not in memo:
        value = make()
        for a in value if isinstance(value, tuple) else (value,):
            a.setflags(write=False)
        memo[key] = value
    return memo[key]


def _runs(records: Sequence, experts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    return memoized(records, ("runs", *experts), lambda: _build_runs(records, experts))


def _build_runs(records: Sequence, experts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    cols = [[r.experts.get(name, ()) for r in records] for name in experts]
    counts = np.array([[len(x) for x in col] for col in cols], np.int64).reshape(len(experts), len(records)).T
    u = np.full((len(records), len(experts), max(int(counts.max(initial=1)), 1)), np.nan)
    for k, col in enumerate(cols):
        m = int(counts[0, k]) if len(records) else 0
        if m and (counts[:, k] == m).all():        # the usual case: one list length, converted in C (None -> NaN)
            u[:, k, :m] = np.array(col, dtype=np.float64)
            continue
        for i, runs in enumerate(col):
            for j, val in enumerate(runs):
                if val is not None:
                    u[i, k, j] = val
    # snapped (half to even, as snap): a file's u and its swap's fl(1 - u) land on u' and 1 - u' exactly
    return np.round(u * GRID) / GRID, counts


def evidence(u: np.ndarray, eps: float = EPS, *, kernels: str = "torch") -> tuple[np.ndarray, ...]:
    """u [N, K, M] (NaN = missing) -> p, delta, z, zt, each [N, K] float64.

    `kernels` ("torch" | "auto" | "triton", see `baer_fast.kernels.dispatch`): "torch" (the
    default) is this numpy code; when the choice resolves to "triton" the fused kernel
    computes the same features in float64.
    """
    if kernels != "torch" and _use_triton(kernels):
        return _evidence_triton(u, eps)
    have = ~np.isnan(u)
    n = have.sum(-1)
    c = np.where(n > 0, order_pair_sum(np.where(have, u - 0.5, 0.0)) / np.maximum(n, 1), 0.0)
    hi = np.where(have, u, -np.inf).max(-1)
    lo = np.where(have, u, np.inf).min(-1)
    delta = np.where(n > 0, hi - lo, 0.0)
    z = logit_centred(c, eps)
    zt = z / (1.0 + 4.0 * delta)
    return 0.5 + c, delta, z, zt


def order_pair_sum(c: np.ndarray) -> np.ndarray:
    """[..., M] -> [...]: runs (0, 1), (2, 3), ... (an expert's two display orders, io.records.swap_runs)
    added first, then the pairs in order. A swap exchanges the members of each pair and negates them,
    so the sum negates exactly; an odd run list is only negated, and any fixed order serves it."""
    if c.shape[-1] % 2:
        c = np.concatenate([c, np.zeros(c.shape[:-1] + (1,))], axis=-1)
    pairs = c[..., 0::2] + c[..., 1::2]
    total = np.zeros(c.shape[:-1])
    for j in range(pairs.shape[-1]):
        total = total + pairs[..., j]
    return total


def _use_triton(kernels: str) -> bool:
    from baer_fast.kernels.dispatch import HAS_TRITON_GPU, resolve_kernels   # imports torch
    return resolve_kernels(kernels, "cuda" if HAS_TRITON_GPU else "cpu") == "triton"


def _evidence_triton(u: np.ndarray, eps: float) -> tuple[np.ndarray, ...]:
    """numpy [N, K, M] -> fused kernel on the GPU (or interpreted on CPU) -> numpy [N, K] x4."""
    import torch
    from baer_fast.kernels.dispatch import HAS_TRITON_GPU
    from baer_fast.kernels.evidence_features import evidence_features
    device = "cuda" if HAS_TRITON_GPU else "cpu"
    out = evidence_features(torch.as_tensor(np.asarray(u, dtype=np.float64), device=device), eps)
    return tuple(t.cpu().numpy() for t in out[:4])


def logit_clipped(p: np.ndarray, eps: float = EPS) -> np.ndarray:
    """Odd logit: computed on the centred value so that logit(1-p) == -logit(p) to rounding."""
    return logit_centred(np.asarray(p, dtype=np.float64) - 0.5, eps)


def logit_centred(c: np.ndarray, eps: float = EPS) -> np.ndarray:
    """logit(1/2 + c), clipped: exactly odd in c (the two logs exchange places when c flips)."""
    c = np.clip(np.asarray(c, dtype=np.float64), eps - 0.5, 0.5 - eps)
    return np.log(0.5 + c) - np.log(0.5 - c)


def group_block(values: Sequence, categories: Sequence[str], zbar: np.ndarray) -> np.ndarray:
    """[N, |categories|]: 1[value_i = c] * zbar_i; a value not in `categories` gives zeros."""
    out = np.zeros((len(values), len(categories)))
    index = {c: j for j, c in enumerate(categories)}
    col = np.fromiter(map(index.get, values, itertools.repeat(-1)), np.int64, len(values))
    hit = np.flatnonzero(col >= 0)
    out[hit, col[hit]] = zbar[hit]
    return out


def stack_features(z: np.ndarray, zt: np.ndarray, subsets: Sequence[str], categories: Sequence[str],
                   tasks: Sequence | None = None, task_categories: Sequence[str] = ()) -> np.ndarray:
    """phi [N, 2K + |G|] = [z_1, zt_1, ..., z_K, zt_K, 1[g(x)=c] * mean_k z_k for c in G] (Eq. 5).

    G = the subsets (`categories`) then the task-type categories (`task_categories`, from
    the optional `category` field, `tasks`). A value unseen at fit time gets zeros.
    """
    n, k = z.shape
    zbar = z.mean(axis=1) if k else np.zeros(n)
    blocks = [np.stack([z, zt], axis=2).reshape(n, 2 * k), group_block(subsets, categories, zbar)]
    if task_categories:
        blocks.append(group_block(tasks if tasks is not None else [None] * n, task_categories, zbar))
    return np.concatenate(blocks, axis=1)


def stack_feature_names(experts: Sequence[str], categories: Sequence[str],
                        task_categories: Sequence[str] = ()) -> list[str]:
    names = []
    for e in experts:
        names += [f"z[{e}]", f"zt[{e}]"]
    return (names + [f"zbar*1[subset={c}]" for c in categories]
            + [f"zbar*1[category={c}]" for c in task_categories])


def coverage(u: np.ndarray) -> np.ndarray:
    """[N, K] bool: the expert has at least one non-missing run for the pair."""
    return (~np.isnan(u)).any(-1)
