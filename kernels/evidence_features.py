"""Fused evidence features: runs u in, (p, delta, z, zt) and optionally the stack map phi out.

Boundary: tensors of expert runs in, per-expert features out. Knows nothing about files,
experts' names, heads or labels. Definitions: the numpy reference of record,
`baer_fast.features.evidence` (p = mean of non-missing runs, centred, order pairs first; delta = their spread;
z = clipped logit of p, zt = z / (1 + 4 delta), phi = stack map with category interactions).

    evidence_features_ref(u, eps, *, category=None, n_categories=0)  torch reference, CPU path
    evidence_features(u, eps, *, category=None, n_categories=0)      Triton launcher

u [N, K, M] fp64 or fp32 (NaN = missing run); category [N] int (outside 0..G-1 = unseen) ->
`Evidence(p, delta, z, zt, phi)`, phi [N, 2K + G] only with `category`. Arithmetic in u's
dtype; pass fp64 to match the numpy reference to rounding. More: docs/architecture.md.
"""
from __future__ import annotations

from typing import NamedTuple

import torch

from baer_fast.kernels._triton import require_triton, tl, triton  # guarded import, shared
from baer_fast.kernels.constants import EPS

_TILE = 4096   # BLOCK_N * BLOCK_K * BLOCK_M values per program: K and M are small (<= ~16)


class Evidence(NamedTuple):
    p: torch.Tensor                 # [N, K] mean of the non-missing runs
    delta: torch.Tensor             # [N, K] spread of the non-missing runs
    z: torch.Tensor                 # [N, K] clipped odd logit of p
    zt: torch.Tensor                # [N, K] z shrunk by the spread
    phi: torch.Tensor | None        # [N, 2K + G] stack map, or None without categories


def evidence_features_ref(u: torch.Tensor, eps: float = EPS, *,
                          category: torch.Tensor | None = None,
                          n_categories: int = 0) -> Evidence:
    """Torch reference of the numpy module (same formulas, same order of clipping)."""
    _check_runs(u)
    have = ~torch.isnan(u)                               # [N, K, M]
    n = have.sum(-1)                                     # [N, K] int
    centred = torch.where(have, u - 0.5, 0.0)
    if centred.shape[-1] % 2:                            # display-order pairs summed first, as numpy
        centred = torch.cat([centred, centred.new_zeros(centred.shape[:-1] + (1,))], dim=-1)
    pairs = centred[..., 0::2] + centred[..., 1::2]
    total = pairs.new_zeros(pairs.shape[:-1])
    for j in range(pairs.shape[-1]):
        total = total + pairs[..., j]
    c = torch.where(n > 0, total / n.clamp(min=1), 0.0)
    p = 0.5 + c
    hi = torch.where(have, u, float("-inf")).amax(-1)
    lo = torch.where(have, u, float("inf")).amin(-1)
    delta = torch.where(n > 0, hi - lo, 0.0)
    c = c.clamp(eps - 0.5, 0.5 - eps)
    z = torch.log(0.5 + c) - torch.log(0.5 - c)
    zt = z / (1.0 + 4.0 * delta)
    phi = None if category is None else _stack_map_ref(z, zt, category, n_categories)
    return Evidence(p, delta, z, zt, phi)


def _stack_map_ref(z: torch.Tensor, zt: torch.Tensor, category: torch.Tensor,
                   n_categories: int) -> torch.Tensor:
    n, k = z.shape
    paired = torch.stack([z, zt], dim=2).reshape(n, 2 * k)           # z_1, zt_1, z_2, ...
    zbar = z.mean(dim=1) if k else z.new_zeros(n)                    # [N]
    onehot = category.to(z.device).long()[:, None] == torch.arange(n_categories, device=z.device)
    inter = torch.where(onehot, zbar[:, None], 0.0)                  # [N, G]; unseen -> 0
    return torch.cat([paired, inter.to(z.dtype)], dim=1)


def evidence_features(u: torch.Tensor, eps: float = EPS, *,
                      category: torch.Tensor | None = None,
                      n_categories: int = 0) -> Evidence:
    """Triton launcher; same contract as `evidence_features_ref`, one pass over u."""
    require_triton()
    _check_runs(u)
    n, k, m = u.shape
    if n == 0 or k == 0:          # nothing to launch over; the reference handles the edges
        return evidence_features_ref(u, eps, category=category, n_categories=n_categories)
    outs = [torch.empty((n, k), dtype=u.dtype, device=u.device) for _ in range(4)]  # p, d, z, zt
    phi = _phi_buffer(u, category, n_categories)
    cat = category.to(u.device) if category is not None else outs[0]   # dummy when no phi
    eps_t = torch.tensor([eps], dtype=u.dtype, device=u.device)      # fp64 eps stays fp64
    block_n, block_k, block_m = _blocks(n, k, m)
    _evidence_kernel[(triton.cdiv(n, block_n),)](
        u, cat, eps_t, *outs, phi if phi is not None else outs[0],
        n, k, m, n_categories,
        u.stride(0), u.stride(1), u.stride(2), cat.stride(0) if category is not None else 0,
        WITH_PHI=phi is not None, BLOCK_N=block_n, BLOCK_K=block_k, BLOCK_M=block_m,
        BLOCK_G=max(2, triton.next_power_of_2(max(n_categories, 1))),
    )
    return Evidence(*outs, phi)


def _phi_buffer(u: torch.Tensor, category: torch.Tensor | None,
                n_categories: int) -> torch.Tensor | None:
    if category is None:
        return None
    if category.shape != (u.shape[0],):
        raise ValueError(f"category must be [N={u.shape[0]}], got {tuple(category.shape)}")
    if category.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"category must be int32 or int64, got {category.dtype}")
    return torch.empty((u.shape[0], 2 * u.shape[1] + n_categories), dtype=u.dtype,
                       device=u.device)                              # [N, 2K + G]


def _blocks(n: int, k: int, m: int) -> tuple[int, int, int]:
    block_k = max(2, triton.next_power_of_2(k))
    block_m = max(2, triton.next_power_of_2(m))
    block_n = max(1, min(triton.next_power_of_2(n), _TILE // (block_k * block_m)))
    return block_n, block_k, block_m


def _check_runs(u: torch.Tensor) -> None:
    if u.dim() != 3 or not u.is_floating_point():
        raise ValueError(f"u must be a float [N, K, M] tensor, got {u.dtype} {tuple(u.shape)}")
    if u.shape[2] == 0:
        raise ValueError("u has no run axis (M == 0); pad missing runs with NaN instead")


if triton is not None:
    @triton.jit
    def _evidence_kernel(
        u_ptr, cat_ptr, eps_ptr, p_ptr, d_ptr, z_ptr, zt_ptr, phi_ptr,
        N, K, M, G,
        stride_un, stride_uk, stride_um, stride_cat,
        WITH_PHI: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
        BLOCK_M: tl.constexpr, BLOCK_G: tl.constexpr,
    ):
        """BLOCK_N rows per program; each row's K x M runs sit in one tile, read once.
        Outputs p, d, z, zt are contiguous [N, K]; phi contiguous [N, 2K + G]."""
        rows = tl.program_id(0).to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)   # [BN]
        ks = tl.arange(0, BLOCK_K)
        ms = tl.arange(0, BLOCK_M)
        nk_ok = (rows < N)[:, None] & (ks < K)[None, :]                            # [BN, BK]
        ok = nk_ok[:, :, None] & (ms < M)[None, None, :]                           # [BN, BK, BM]
        u = tl.load(u_ptr + rows[:, None, None] * stride_un + ks[None, :, None] * stride_uk
                    + ms[None, None, :] * stride_um, mask=ok, other=float("nan"))
        eps = tl.load(eps_ptr)                  # in u's dtype: an fp32 scalar arg would round it
        have = u == u                           # False exactly for NaN (missing) and padding
        n = tl.sum(have.to(u.dtype), axis=2)
        # centred runs, as the reference; tl.sum's order is the compiler's, so the swap's negation
        # holds to rounding here and bit for bit on the reference paths
        c = tl.where(n > 0, tl.sum(tl.where(have, u - 0.5, 0.0), axis=2) / tl.maximum(n, 1.0), 0.0)
        p = 0.5 + c
        hi = tl.max(tl.where(have, u, float("-inf")), axis=2)
        lo = tl.min(tl.where(have, u, float("inf")), axis=2)
        delta = tl.where(n > 0, hi - lo, 0.0)
        c = tl.minimum(tl.maximum(c, eps - 0.5), 0.5 - eps)
        z = tl.log(0.5 + c) - tl.log(0.5 - c)
        zt = z / (1.0 + 4.0 * delta)
        out = rows[:, None] * K + ks[None, :]
        tl.store(p_ptr + out, p, mask=nk_ok)
        tl.store(d_ptr + out, delta, mask=nk_ok)
        tl.store(z_ptr + out, z, mask=nk_ok)
        tl.store(zt_ptr + out, zt, mask=nk_ok)
        if WITH_PHI:
            base = phi_ptr + rows[:, None] * (2 * K + G)                           # [BN, 1]
            tl.store(base + 2 * ks[None, :], z, mask=nk_ok)
            tl.store(base + 2 * ks[None, :] + 1, zt, mask=nk_ok)
            zbar = tl.sum(tl.where(nk_ok, z, 0.0), axis=1) / K                     # [BN]
            cat = tl.load(cat_ptr + rows * stride_cat, mask=rows < N, other=-1)
            gs = tl.arange(0, BLOCK_G)
            inter = tl.where(cat[:, None] == gs[None, :], zbar[:, None], 0.0)       # [BN, BG]
            tl.store(base + 2 * K + gs[None, :], inter,
                     mask=(rows < N)[:, None] & (gs < G)[None, :])
