"""Decode attention over slot buffers: one new query per row, each row over its own KV length.

Boundary: queries, the slot buffers, each row's slot and length in; attention outputs out.
Knows nothing about models, masks or which tokens the columns hold.

decode_attention_ref (torch, the CPU path), decode_attention (Triton launcher), the @triton.jit
_decode_split_kernel and _decode_combine_kernel. Shapes: q [B, Hq, D]; k_buf [S, Hkv, C, D], v_buf [S, Hkv, C, Dv] (Hq a multiple of Hkv:
grouped-query heads share their KV head); slots [B] int (row b reads slot slots[b]); lengths
[B] int (row b attends to columns [0, lengths[b])) -> out [B, Hq, Dv] in q's dtype. No mask
tensor: columns past a row's length are never read. Like flash-decoding, the KV length is
split into chunks of `split` columns, each program one (row, KV head, chunk) with an online
softmax in fp32, and a second kernel combines the chunks' partial results.
"""
from __future__ import annotations

import torch

from baer_fast.kernels._triton import require_triton, tl, triton  # guarded import, shared

# Launch settings by input dtype. split: KV columns per program (flash-decoding's split; short
# rows use one chunk); block_n: KV columns per inner step; dot: products through tl.dot (query
# heads padded to 16) instead of broadcast fp32 products summed in registers. Half types take the
# tensor cores: on one H200 at the Qwen3-8B head shape, 64 rows, this launch took 79 us per call
# at 576 columns and 301 us at 4,160, against 477 and 3,324 us for the sums launch and 154 and
# 1,001 us for masked SDPA (benchmarks/results/h200-2026-12-04, profile_decode.py --variants).
# fp32 keeps the sums: its IEEE tl.dot runs without tensor cores and was 5x slower there.
LAUNCH = {"half": dict(dot=True, block_n=64, split=128, num_warps=4),
          "fp32": dict(dot=False, block_n=64, split=256, num_warps=4)}


def launch_defaults(dtype: torch.dtype) -> dict:
    return dict(LAUNCH["fp32" if dtype == torch.float32 else "half"])


def decode_attention_ref(q: torch.Tensor, k_buf: torch.Tensor, v_buf: torch.Tensor, slots: torch.Tensor,
                         lengths: torch.Tensor, *, scale: float) -> torch.Tensor:
    """q [B, Hq, D], k_buf [S, Hkv, C, D], v_buf [S, Hkv, C, Dv], slots [B], lengths [B]
    -> [B, Hq, Dv] in q's dtype; scores and softmax in fp32."""
    b, hq, _ = q.shape
    group = hq // k_buf.shape[1]
    width = int(lengths.max())
    k = k_buf[slots, :, :width].float().repeat_interleave(group, dim=1)           # [B, Hq, W, D]
    v = v_buf[slots, :, :width].float().repeat_interleave(group, dim=1)           # [B, Hq, W, Dv]
    hide = torch.arange(width, device=q.device)[None, :] >= lengths[:, None]       # [B, W]
    v = v.masked_fill(hide[:, None, :, None], 0.0)                                  # unwritten columns: not read
    scores = torch.einsum("bhd,bhwd->bhw", q.float(), k) * scale
    weights = torch.softmax(scores.masked_fill(hide[:, None, :], float("-inf")), dim=-1)
    return torch.einsum("bhw,bhwd->bhd", weights, v).to(q.dtype)


def decode_attention(q: torch.Tensor, k_buf: torch.Tensor, v_buf: torch.Tensor, slots: torch.Tensor,
                     lengths: torch.Tensor, *, scale: float, split: int | None = None,
                     block_n: int | None = None, dot: bool | None = None, num_warps: int | None = None) -> torch.Tensor:
    """Triton launcher; same contract as `decode_attention_ref`. `split`: KV columns per
    program; the number of chunks is fixed by the buffer's columns, so a launch's
    shape does not depend on the lengths (no host sync on them). `block_n`: KV columns per inner
    step. `dot`: both products through tl.dot in the inputs' dtype (fp32: IEEE, no TF32), the
    query heads padded to 16 rows, p @ v as two dots of p's high and low parts; instead of
    broadcast fp32 products summed in registers. Defaults: LAUNCH for q's dtype."""
    require_triton()
    _check(q, k_buf, v_buf, slots, lengths)
    b, hq, d = q.shape
    s_n, hkv, cols, _ = k_buf.shape
    dv = v_buf.shape[3]
    group = hq // hkv
    conf = launch_defaults(q.dtype)
    split, block_n = split or conf["split"], block_n or conf["block_n"]
    dot = conf["dot"] if dot is None else dot
    chunks = triton.cdiv(cols, split)
    m = torch.empty((b, hq, chunks), dtype=torch.float32, device=q.device)
    lse = torch.empty_like(m)
    acc = torch.empty((b, hq, chunks, dv), dtype=torch.float32, device=q.device)
    out = torch.empty((b, hq, dv), dtype=q.dtype, device=q.device)
    if b == 0:
        return out
    least = 16 if dot else 1                     # tl.dot's least block side
    block_g, block_d, block_dv = (max(least, triton.next_power_of_2(x)) for x in (group, d, dv))
    block_n = max(least, min(block_n, triton.next_power_of_2(split)))
    _decode_split_kernel[(b, hkv, chunks)](
        q, k_buf, v_buf, slots, lengths, m, lse, acc, scale,
        q.stride(0), q.stride(1), k_buf.stride(0), k_buf.stride(1), k_buf.stride(2),
        v_buf.stride(0), v_buf.stride(1), v_buf.stride(2), chunks,
        GROUP=group, D=d, DV=dv, SPLIT=split, BLOCK_G=block_g, BLOCK_D=block_d, BLOCK_DV=block_dv, BLOCK_N=block_n, DOT=dot,
        PRECISION="ieee" if q.dtype == torch.float32 else "tf32", num_warps=num_warps or conf["num_warps"])
    _decode_combine_kernel[(b, hq)](m, lse, acc, out, chunks, out.stride(0), out.stride(1), DV=dv,
                                    BLOCK_C=triton.next_power_of_2(chunks), BLOCK_DV=triton.next_power_of_2(dv))
    return out


def _check(q, k_buf, v_buf, slots, lengths) -> None:
    if q.dim() != 3 or k_buf.dim() != 4 or v_buf.dim() != 4 or q.shape[2] != k_buf.shape[3]:
        raise ValueError(f"q [B, Hq, D], k_buf [S, Hkv, C, D] must agree on D, got {tuple(q.shape)}, "
                         f"{tuple(k_buf.shape)}")
    if q.shape[1] % k_buf.shape[1] or k_buf.shape[:3] != v_buf.shape[:3]:
        raise ValueError("Hq must be a multiple of Hkv, and k_buf, v_buf must share [S, Hkv, C]")
    if tuple(slots.shape) != (q.shape[0],) or tuple(lengths.shape) != (q.shape[0],):
        raise ValueError(f"slots and lengths must be [B={q.shape[0]}]")
    if k_buf.stride(3) != 1 or v_buf.stride(3) != 1 or q.stride(2) != 1:
        raise ValueError("the head dimension must be contiguous")


if triton is not None:
    @triton.jit
    def _decode_split_kernel(q_ptr, k_ptr, v_ptr, slots_ptr, len_ptr, m_ptr, lse_ptr, acc_ptr, scale,
                             sq_b, sq_h, sk_s, sk_h, sk_c, sv_s, sv_h, sv_c, CHUNKS,
                             GROUP: tl.constexpr, D: tl.constexpr, DV: tl.constexpr, SPLIT: tl.constexpr,
                             BLOCK_G: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
                             BLOCK_N: tl.constexpr, DOT: tl.constexpr, PRECISION: tl.constexpr):
        """One (row, KV head, chunk): the GROUP query heads of that KV head over the chunk's
        columns below the row's length -> running max m, log-sum-exp and unnormalised output."""
        row, kvh, chunk = tl.program_id(0), tl.program_id(1), tl.program_id(2)
        slot = tl.load(slots_ptr + row).to(tl.int64)
        length = tl.load(len_ptr + row)
        gs, ds, dvs = tl.arange(0, BLOCK_G), tl.arange(0, BLOCK_D), tl.arange(0, BLOCK_DV)
        heads = kvh * GROUP + gs                                                     # [G]
        q = tl.load(q_ptr + row * sq_b + heads[:, None] * sq_h + ds[None, :],
                    mask=(gs < GROUP)[:, None] & (ds < D)[None, :], other=0.0)                  # [G, D]
        if not DOT:
            q = q.to(tl.float32)
        m_i = tl.full((BLOCK_G,), float("-inf"), tl.float32)
        l_i = tl.zeros((BLOCK_G,), tl.float32)
        acc = tl.zeros((BLOCK_G, BLOCK_DV), tl.float32)
        start = chunk * SPLIT
        end = tl.minimum(start + SPLIT, length)
        k_base = k_ptr + slot * sk_s + kvh * sk_h
        v_base = v_ptr + slot * sv_s + kvh * sv_h
        for n0 in range(start, end, BLOCK_N):
            ns = n0 + tl.arange(0, BLOCK_N)                                          # [N]
            ok = ns < end
            k = tl.load(k_base + ns[:, None] * sk_c + ds[None, :], mask=ok[:, None] & (ds < D)[None, :],
                        other=0.0)                                                   # [N, D]
            v = tl.load(v_base + ns[:, None] * sv_c + dvs[None, :], mask=ok[:, None] & (dvs < DV)[None, :],
                        other=0.0)                                                   # [N, DV]
            if DOT:      # the inputs' dtype, fp32 accumulation: exact products (fp32 inputs: no TF32)
                s = tl.dot(q, tl.trans(k), input_precision=PRECISION) * scale        # [G, N]
            else:
                s = tl.sum(q[:, None, :] * k[None, :, :].to(tl.float32), axis=2) * scale
            s = tl.where(ok[None, :], s, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, axis=1))
            p = tl.exp(s - m_new[:, None])
            alpha = tl.exp(m_i - m_new)
            if DOT:      # p as the sum of two parts in v's dtype: p @ v to ~16 bits, not the dtype's 8
                p_hi = p.to(v.dtype)
                p_lo = (p - p_hi.to(tl.float32)).to(v.dtype)
                pv = tl.dot(p_hi, v, input_precision=PRECISION) + tl.dot(p_lo, v, input_precision=PRECISION)
                acc = acc * alpha[:, None] + pv
            else:
                acc = acc * alpha[:, None] + tl.sum(p[:, :, None] * v[None, :, :].to(tl.float32), axis=1)
            l_i = l_i * alpha + tl.sum(p, axis=1)
            m_i = m_new
        at = (row * GROUP * tl.num_programs(1) + heads) * CHUNKS + chunk             # [G] in [B, Hq, CHUNKS]
        tl.store(m_ptr + at, m_i, mask=gs < GROUP)
        tl.store(lse_ptr + at, l_i, mask=gs < GROUP)
        tl.store(acc_ptr + at[:, None] * DV + dvs[None, :], acc, mask=(gs < GROUP)[:, None] & (dvs < DV)[None, :])

    @triton.jit
    def _decode_combine_kernel(m_ptr, l_ptr, acc_ptr, out_ptr, CHUNKS, so_b, so_h,
                               DV: tl.constexpr, BLOCK_C: tl.constexpr, BLOCK_DV: tl.constexpr):
        """One (row, query head): the chunks' partial softmaxes rescaled to their common max."""
        row, head = tl.program_id(0), tl.program_id(1)
        cs, dvs = tl.arange(0, BLOCK_C), tl.arange(0, BLOCK_DV)
        base = (row * tl.num_programs(1) + head) * CHUNKS
        m = tl.load(m_ptr + base + cs, mask=cs < CHUNKS, other=float("-inf"))       # [C]
        l_c = tl.load(l_ptr + base + cs, mask=cs < CHUNKS, other=0.0)
        top = tl.max(m, axis=0)
        w = tl.where(m > float("-inf"), tl.exp(m - top), 0.0)                        # empty chunks weigh 0
        acc = tl.load(acc_ptr + (base + cs)[:, None] * DV + dvs[None, :],
                      mask=(cs < CHUNKS)[:, None] & (dvs < DV)[None, :], other=0.0)  # [C, DV]
        out = tl.sum(acc * w[:, None], axis=0) / tl.sum(l_c * w, axis=0)
        tl.store(out_ptr + row * so_b + head * so_h + dvs, out.to(out_ptr.dtype.element_ty), mask=dvs < DV)
