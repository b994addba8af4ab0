"""The decode step's attention through the kernels' decode attention: per-row lengths, no mask.

Registered as a transformers attention function (NAME). The decoder runs its decode steps
through `forward`, with the model's attention switched to NAME; every layer's attention calls kernels.dispatch.decode_attention over the slots' keys and values
(the cache's views, columns [0, width)), each row over its own length. Used only on CUDA where
the dispatcher picks Triton, and only after `probe` showed the kernel on that device, in the
model's dtype and head shape, within the masked path's own error bound of float64; models with
sliding-window layers or soft-capped scores keep the masked path.
"""
from __future__ import annotations

import logging
import threading

log = logging.getLogger("baer_fast")

NAME = "baer_decode_kernel"
PROBE_LENGTHS = (1, 37, 130, 300)      # the load-time probe's rows: their KV lengths (several chunks)
_active = threading.local()


def forward(loaded, ids, pos, mask, cache, kernels: str):
    """One decode step (ids, pos [n, 1]) of the base model with every layer's attention on the
    decode kernel, each row over columns [0, pos + 1) -> hidden [n, 1, H]. The 4-D mask is
    handed through for the model's own bookkeeping and never read by the kernel."""
    from transformers import AttentionInterface
    AttentionInterface.register(NAME, attention)
    cfg = loaded.base.config
    before, impl = getattr(_active, "state", None), cfg._attn_implementation
    _active.state, cfg._attn_implementation = (pos[:, 0] + 1, kernels), NAME
    try:
        kw = {loaded.cache_arg: cache, "use_cache": True}
        return loaded.base(input_ids=ids, attention_mask=mask, position_ids=pos, **kw).last_hidden_state
    finally:
        _active.state, cfg._attn_implementation = before, impl


def attention(module, query, key, value, attention_mask, scaling=None, **kwargs):
    """query [n, Hq, 1, D], key [n, Hkv, W, D], value [n, Hkv, W, Dv] -> ([n, 1, Hq, Dv], None)."""
    import torch

    from baer_fast.kernels.dispatch import decode_attention
    lengths, kernels = _active.state
    n = query.shape[0]
    scale = scaling if scaling is not None else getattr(module, "scaling", query.shape[-1] ** -0.5)
    out = decode_attention(query[:, :, 0].contiguous(), key, value, torch.arange(n, device=query.device),
                           lengths, scale=scale, kernels=kernels)
    return out[:, None], None


def usable(loaded, kernels: str) -> bool:
    """Whether the decode kernel may run for `loaded` (before the probe): CUDA with the Triton
    path chosen, full attention on every layer, no soft-capped scores, SDPA for masked calls."""
    from baer_fast.kernels.dispatch import resolve_kernels
    if loaded.device.type != "cuda" or any(w is not None for w in loaded.windows.values()):
        return False
    if loaded.masked_attention() != "sdpa":
        return False
    return resolve_kernels(kernels, loaded.device) == "triton"


def masked_sdpa(q, k_buf, v_buf, slots, lengths, *, scale: float):
    """What the masked decode path computes for the same inputs: SDPA in the input dtype over
    columns [0, widest) under an additive mask (dtype min past each row's length) -> [B, Hq, Dv]."""
    import torch
    group = q.shape[1] // k_buf.shape[1]
    w = int(lengths.max())
    k, v = (t[slots, :, :w].repeat_interleave(group, 1) for t in (k_buf, v_buf))
    mask = torch.zeros(len(slots), 1, 1, w, dtype=q.dtype, device=q.device)
    mask.masked_fill_(torch.arange(w, device=q.device)[None, None, None, :] >= lengths[:, None, None, None],
                      torch.finfo(q.dtype).min)
    return torch.nn.functional.scaled_dot_product_attention(q[:, :, None], k, v, attn_mask=mask, scale=scale)[:, :, 0]


def sdpa_reference(q, k_buf, v_buf, slots, lengths, *, scale: float):
    """-> (the decode attention in float64 [B, Hq, Dv], the masked path's error against it in q's dtype,
    the bound a kernel must meet): twice the masked path's own error plus the dtype's rounding of the
    output (flash-attention's rule, as tests/kernels state it). NaN past a row's length is allowed: the
    masked path reads every column, so it gets them as 0."""
    import torch

    from baer_fast.kernels.decode_attention import decode_attention_ref
    exact = decode_attention_ref(q.double(), k_buf.double(), v_buf.double(), slots, lengths, scale=scale)
    clean = [t.nan_to_num(0.0) for t in (k_buf, v_buf)]
    sdpa_err = float((masked_sdpa(q, *clean, slots, lengths, scale=scale).double() - exact).abs().max())
    return exact, sdpa_err, 2 * sdpa_err + torch.finfo(q.dtype).eps * float(exact.abs().max())


def attention_error(q, k_buf, v_buf, slots, lengths, *, scale: float, kernels: str) -> tuple[float, float]:
    """(the dispatched decode attention's largest error against float64, the bound it must meet:
    `sdpa_reference`'s). A kernel that reads columns past a row's length (NaN there) errs by NaN,
    which meets no bound."""
    from baer_fast.kernels.dispatch import decode_attention
    exact, _, bound = sdpa_reference(q, k_buf, v_buf, slots, lengths, scale=scale)
    got = decode_attention(q, k_buf, v_buf, slots, lengths, scale=scale, kernels=kernels)
    return float((got.double() - exact).abs().max()), bound


def probe(loaded, kernels: str) -> bool:
    """The decode-attention kernel on this device, in the model's dtype and head shape (rows of
    ragged lengths over several chunks, NaN in every column past a row's length), is within
    `attention_error`'s bound of float64; logs which path the decode steps take. A numerical
    probe, not a token one: tokens of two correct paths that round differently part at the first
    near-tie of the logits (random bf16 weights have many), which says nothing about the kernel."""
    import torch
    (hkv, d), (_, dv) = loaded.kv_shape()
    hq = loaded.base.config.num_attention_heads
    g = torch.Generator().manual_seed(0)
    lengths = torch.tensor(PROBE_LENGTHS)
    cols = max(PROBE_LENGTHS) + 7
    q = torch.randn(len(PROBE_LENGTHS), hq, d, generator=g)
    k = torch.randn(len(PROBE_LENGTHS) + 2, hkv, cols, d, generator=g)
    v = torch.randn(len(PROBE_LENGTHS) + 2, hkv, cols, dv, generator=g)
    slots = torch.randperm(len(PROBE_LENGTHS) + 2, generator=g)[: len(PROBE_LENGTHS)]
    for row, n in enumerate(PROBE_LENGTHS):
        k[slots[row], :, n:] = float("nan")
        v[slots[row], :, n:] = float("nan")
    dev, dt = loaded.device, loaded.dtype
    try:
        err, bound = attention_error(q.to(dev, dt), k.to(dev, dt), v.to(dev, dt), slots.to(dev), lengths.to(dev),
                                     scale=d ** -0.5, kernels=kernels)
        ok, why = err <= bound, f"error {err:.3g} against a bound of {bound:.3g}"
    except Exception as exc:             # a kernel that does not compile on this device
        ok, why = False, f"{type(exc).__name__}: {exc}"
    (log.info if ok else log.warning)("decoder: decode steps %s the decode-attention kernel (its probe: %s)",
                                      "through" if ok else "without", why)
    return ok
