"""Constrained single-token readout: log-softmax over a few allowed tokens, never the full vocab.

Boundary: hidden states and the LM head in, log-probabilities over the C allowed token ids
out. Knows nothing about prompts, protocols or which label a token means.

    choice_logits_ref(hidden, weight, choice_ids, *, bias=None)  torch reference, the CPU path
    choice_logits(hidden, weight, choice_ids, *, bias=None)      Triton launcher

hidden [N, H], weight [V, H], choice_ids [N, C] or [C], bias [V] -> logprobs [N, C] fp32,
accumulated in fp32; only the C gathered rows of `weight` are read. Device-side ids are not
bounds-checked (no host sync); the launcher checks CPU ones. Triton is imported guarded
(TRITON_INTERPRET=1 before import interprets it on CPU). More: docs/architecture.md.
"""
from __future__ import annotations

import torch

from baer_fast.kernels._triton import require_triton, tl, triton  # guarded import, shared

MAX_CHOICES = 64      # one register tile holds all C choices; protocols use 2..9 labels
_GPU_TILE = 8192          # BLOCK_N*BLOCK_C*BLOCK_H fp32 values per loop step: fits registers
_INTERPRET_TILE = 1 << 18  # interpreter: numpy does the tile at once, Python pays per step


def choice_logits_ref(hidden: torch.Tensor, weight: torch.Tensor, choice_ids: torch.Tensor, *,
                      bias: torch.Tensor | None = None, softcap: float | None = None) -> torch.Tensor:
    """hidden [N, H], weight [V, H], choice_ids [N, C] or [C] -> logprobs [N, C] fp32.

    Gathers the C LM-head rows first, so no [N, V] tensor is ever formed. `softcap`: the
    model's final logit soft-capping (Gemma 2: c * tanh(logit / c)), applied before the
    log-softmax; the kernel has none.
    """
    # index_select, not weight[ids]: advanced indexing is far slower on a large head on CPU (docs/performance.md)
    if choice_ids.dim() == 1:                            # shared ids: gather [C, H] once
        logits = hidden.float() @ weight.index_select(0, choice_ids).float().T
    else:
        ids = _rowwise_ids(choice_ids, hidden.shape[0])  # [N, C] int
        rows = weight.index_select(0, ids.reshape(-1)).view(*ids.shape, -1)  # [N, C, H] only
        logits = torch.einsum("nh,nch->nc", hidden.float(), rows.float())
    if bias is not None:
        picked = bias.index_select(0, choice_ids.reshape(-1)).view(choice_ids.shape)  # [C]|[N, C]
        logits = logits + picked.float()
    if softcap is not None:
        logits = softcap * torch.tanh(logits / softcap)
    return torch.log_softmax(logits, dim=-1)             # [N, C] fp32


def choice_logits(hidden: torch.Tensor, weight: torch.Tensor, choice_ids: torch.Tensor, *,
                  bias: torch.Tensor | None = None, tile_elems: int | None = None) -> torch.Tensor:
    """Triton launcher; same contract as `choice_logits_ref`.

    `tile_elems` bounds BLOCK_N * BLOCK_C * BLOCK_H, the register tile of one loop step
    (default: `_GPU_TILE` on CUDA; `_INTERPRET_TILE` on CPU, where the interpreter runs each
    program and step in Python, so fewer, larger ones are much faster).
    """
    require_triton()
    ids = _rowwise_ids(choice_ids, hidden.shape[0])      # [N, C]; shared ids get row stride 0
    _check_inputs(hidden, weight, ids, bias)
    n, h = hidden.shape
    c = ids.shape[1]
    out = torch.empty((n, c), dtype=torch.float32, device=hidden.device)   # [N, C] fp32
    if n == 0:
        return out
    block_n, block_c, block_h = _blocks(n, c, h, tile_elems or _default_tile(hidden.device))
    _choice_logits_kernel[(triton.cdiv(n, block_n),)](
        hidden, weight, ids, bias if bias is not None else hidden, out,
        n, h, c,
        hidden.stride(0), hidden.stride(1), weight.stride(0), weight.stride(1),
        ids.stride(0), ids.stride(1), bias.stride(0) if bias is not None else 0,
        HAS_BIAS=bias is not None, BLOCK_N=block_n, BLOCK_C=block_c, BLOCK_H=block_h,
    )
    return out


def _default_tile(device: torch.device) -> int:
    return _GPU_TILE if device.type == "cuda" else _INTERPRET_TILE


def _blocks(n: int, c: int, h: int, tile: int) -> tuple[int, int, int]:
    """Power-of-two BLOCK_N, BLOCK_C, BLOCK_H with product <= tile (BLOCK_H >= 16 first)."""
    block_c = max(2, triton.next_power_of_2(c))
    block_h = max(16, min(triton.next_power_of_2(h), tile // block_c))
    block_n = max(1, min(triton.next_power_of_2(n), tile // (block_c * block_h)))
    return block_n, block_c, block_h


def _rowwise_ids(choice_ids: torch.Tensor, n: int) -> torch.Tensor:
    """[C] -> [N, C] view with row stride 0 (no copy); [N, C] passes through."""
    if choice_ids.dim() == 1:
        return choice_ids.unsqueeze(0).expand(n, -1)
    if choice_ids.dim() != 2 or choice_ids.shape[0] != n:
        raise ValueError(f"choice_ids must be [C] or [N={n}, C], got {tuple(choice_ids.shape)}")
    return choice_ids


def _check_inputs(hidden: torch.Tensor, weight: torch.Tensor, ids: torch.Tensor,
                  bias: torch.Tensor | None) -> None:
    if hidden.dim() != 2 or weight.dim() != 2 or hidden.shape[1] != weight.shape[1]:
        raise ValueError(f"hidden [N, H] and weight [V, H] must agree on H, got "
                         f"{tuple(hidden.shape)} and {tuple(weight.shape)}")
    if not 1 <= ids.shape[1] <= MAX_CHOICES:
        raise ValueError(f"choice_logits supports 1..{MAX_CHOICES} choices, got {ids.shape[1]}")
    if ids.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"choice_ids must be int32 or int64, got {ids.dtype}")
    if bias is not None and tuple(bias.shape) != (weight.shape[0],):
        raise ValueError(f"bias must be [V={weight.shape[0]}], got {tuple(bias.shape)}")
    devices = {t.device for t in (hidden, weight, ids) if t is not None}
    if bias is not None:
        devices.add(bias.device)
    if len(devices) != 1:
        raise ValueError(f"hidden, weight, choice_ids and bias must share a device, got {devices}")
    if ids.device.type == "cpu" and ids.numel() and not (0 <= int(ids.min()) and
                                                         int(ids.max()) < weight.shape[0]):
        raise IndexError(f"choice_ids out of range for a vocabulary of {weight.shape[0]}")


if triton is not None:
    @triton.jit
    def _choice_logits_kernel(
        hidden_ptr, weight_ptr, ids_ptr, bias_ptr, out_ptr,
        N, H, C,
        stride_hn, stride_hh, stride_wv, stride_wh, stride_in, stride_ic, stride_b,
        HAS_BIAS: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_C: tl.constexpr,
        BLOCK_H: tl.constexpr,
    ):
        """BLOCK_N rows per program: logits[n, c] = <hidden[n], weight[ids[n, c]]> (+ bias),
        then log-softmax over the C valid lanes. Elementwise multiply + sums, not tl.dot:
        per-row ids make each row's [C, H] tile distinct and too thin for tensor cores, and
        every dtype is upcast to fp32 before multiplying (fp32 accumulation; the interpreter
        also multiplies bf16 wrongly inside tl.dot)."""
        rows = tl.program_id(0).to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)  # [BN]
        cs = tl.arange(0, BLOCK_C)                                               # [BC]
        nc_ok = (rows < N)[:, None] & (cs < C)[None, :]                          # [BN, BC]
        ids = tl.load(ids_ptr + rows[:, None] * stride_in + cs[None, :] * stride_ic,
                      mask=nc_ok, other=0).to(tl.int64)                          # [BN, BC]
        w_rows = weight_ptr + ids[:, :, None] * stride_wv                        # [BN, BC, 1]
        x_rows = hidden_ptr + rows[:, None] * stride_hn                          # [BN, 1]
        acc = tl.zeros((BLOCK_N, BLOCK_C), dtype=tl.float32)
        for h0 in range(0, H, BLOCK_H):
            hs = h0 + tl.arange(0, BLOCK_H)                                      # [BH]
            h_ok = hs < H
            x = tl.load(x_rows + hs[None, :] * stride_hh,
                        mask=(rows < N)[:, None] & h_ok[None, :], other=0.0)     # [BN, BH]
            w = tl.load(w_rows + hs[None, None, :] * stride_wh,
                        mask=nc_ok[:, :, None] & h_ok[None, None, :], other=0.0)  # [BN, BC, BH]
            acc += tl.sum(w.to(tl.float32) * x.to(tl.float32)[:, None, :], axis=2)
        if HAS_BIAS:
            acc += tl.load(bias_ptr + ids * stride_b, mask=nc_ok, other=0.0).to(tl.float32)
        # padded choice lanes -> -inf; padded rows keep acc == 0 (masked loads), so no NaN
        logits = tl.where((cs < C)[None, :], acc, float("-inf"))
        shifted = logits - tl.max(logits, axis=1)[:, None]
        lse = tl.log(tl.sum(tl.exp(shifted), axis=1))[:, None]
        tl.store(out_ptr + rows[:, None] * C + cs[None, :], shifted - lse, mask=nc_ok)
