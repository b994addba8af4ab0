"""Router reliability features rho_ik (paper Eq. 7): one candidate-invariant row per (pair, expert).

Signals records in, rho [N, K, D] float64 out; knows nothing about labels or models.

Every entry is unchanged when the candidates are swapped (rho_k(Tx) = rho_k(x)): signs enter
only through agreement shares and the vote-split entropy, lengths only through min / max /
|diff|. Swapping maps u -> 1 - u, which changes p, |z| and delta in the last bits, so
continuous entries are rounded to ROUND_DIGITS decimals and signs are taken with a SIGN_TOL
dead zone: the swapped pair gives bit-identical rows and the router picks the same expert.

Per (i, k): the expert's one-hot, |z_k|, delta_k, its agreement with the other decided experts,
mean/max/std of |z| over experts, vote entropy and undecided share, log1p pair metadata
(len_q; min/max/|diff| of lengths, code, lists, digits), subset and task-category one-hots
(`reliability_feature_names` lists them in order; docs/formats.md).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from baer_fast.features.evidence import EPS, evidence, runs_tensor
from baer_fast.io.text_stats import STAT_NAMES

ROUND_DIGITS = 9       # continuous features are rounded so a swap gives bit-identical rows
SIGN_TOL = 1e-12       # |p - 0.5| below this is undecided (sign 0)


def signs(p: np.ndarray) -> np.ndarray:
    """[N, K] sign of p - 0.5 with a dead zone, as float (+1, -1, 0)."""
    c = p - 0.5
    return np.where(c > SIGN_TOL, 1.0, np.where(c < -SIGN_TOL, -1.0, 0.0))


def agreement(sg: np.ndarray) -> np.ndarray:
    """[N, K] share of the other decided experts that share expert k's sign."""
    pos = (sg > 0).sum(axis=1, keepdims=True)
    neg = (sg < 0).sum(axis=1, keepdims=True)
    same = np.where(sg > 0, pos - 1, np.where(sg < 0, neg - 1, 0))
    others = pos + neg - (sg != 0)
    share = same / np.maximum(others, 1)
    return np.where((sg != 0) & (others > 0), share, 0.5)


def vote_stats(sg: np.ndarray) -> np.ndarray:
    """[N, 2] entropy (bits) of the (+, -, 0) vote split, and the undecided share."""
    k = max(sg.shape[1], 1)
    frac = np.stack([(sg > 0).sum(1), (sg < 0).sum(1), (sg == 0).sum(1)], axis=1) / k
    ent = -np.sum(np.where(frac > 0, frac * np.log2(np.where(frac > 0, frac, 1.0)), 0.0), axis=1)
    return np.stack([ent, frac[:, 2]], axis=1)


def meta_features(records: Sequence) -> np.ndarray:
    """[N, 1 + 3 * |STAT_NAMES|] log1p(len_q) and symmetric min/max/|diff| per stat."""
    out = np.zeros((len(records), 1 + 3 * len(STAT_NAMES)))
    for i, rec in enumerate(records):
        m = rec.meta
        row = [float(m.get("len_q", 0) or 0)]
        for s in STAT_NAMES:
            a, b = float(m.get(f"{s}_a", 0) or 0), float(m.get(f"{s}_b", 0) or 0)
            row += [min(a, b), max(a, b), abs(a - b)]
        out[i] = np.log1p(np.maximum(row, 0.0))
    return out


def one_hot(values: Sequence[str], categories: Sequence[str]) -> np.ndarray:
    index = {c: j for j, c in enumerate(categories)}
    out = np.zeros((len(values), len(categories)))
    for i, v in enumerate(values):
        if v in index:
            out[i, index[v]] = 1.0
    return out


def reliability_features(records: Sequence, experts: Sequence[str], categories: Sequence[str],
                         eps: float = EPS, task_categories: Sequence[str] = ()) -> np.ndarray:
    """rho [N, K, D] for records (signals); D = len(reliability_feature_names(...))."""
    n, k = len(records), len(experts)
    p, delta, z, _ = evidence(runs_tensor(records, experts), eps)
    absz = np.abs(z)
    sg = signs(p)
    own = np.stack([absz, delta, agreement(sg)], axis=2)                       # [N, K, 3]
    spread = np.stack([absz.mean(1), absz.max(1), absz.std(1)], axis=1) if k else np.zeros((n, 3))
    pair = np.concatenate([spread, vote_stats(sg), meta_features(records),
                           one_hot([r.subset for r in records], categories),
                           one_hot([getattr(r, "category", None) for r in records], task_categories)],
                          axis=1)  # [N, P]
    ident = np.broadcast_to(np.eye(k), (n, k, k))
    rho = np.concatenate([ident, own, np.broadcast_to(pair[:, None, :], (n, k, pair.shape[1]))], axis=2)
    return np.round(rho, ROUND_DIGITS)


def reliability_feature_names(experts: Sequence[str], categories: Sequence[str],
                              task_categories: Sequence[str] = ()) -> list[str]:
    names = [f"1[expert={e}]" for e in experts]
    names += ["|z_k|", "delta_k", "agree_k", "mean|z|", "max|z|", "std|z|", "vote_entropy",
              "undecided_share", "log1p(len_q)"]
    for s in STAT_NAMES:
        names += [f"log1p(min {s})", f"log1p(max {s})", f"log1p(|diff {s}|)"]
    return names + [f"1[subset={c}]" for c in categories] + [f"1[category={c}]" for c in task_categories]
