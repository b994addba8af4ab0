"""The decode step's attention through the kernels' decode attention: per-row lengths, no mask.

Registered as a transformers attention function (NAME). The decoder runs its decode steps
through `forward`, with the model's attention switched to NAME; every layer's attention calls kernels.dispatch.decode_attention over the slots' keys and values
(the cache's views, columns [0, width)), each row over its own length. Used only on CUDA where
the dispatcher picks Triton, and only after `probe` on that device gave the eager path's
tokens; models with sliding-window layers or soft-capped scores keep the masked path.
"""
from __future__ import annotations

import logging
import threading

log = logging.getLogger("baer_fast")

NAME = "baer_decode_kernel"
PROBE_PROMPT, PROBE_TOKENS = 40, 8      # the load-time probe: prompt tokens, greedy tokens compared
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


def probe(decoder_class, loaded, kernels: str) -> bool:
    """Greedy tokens of a probe prompt through the kernel and through the masked path (two fresh
    decoders) are equal; logs which path the decode steps take."""
    from baer_fast.runtime.decode_io import GenRequest
    vocab = loaded.model.get_input_embeddings().num_embeddings
    req = GenRequest(tuple((7 * i + 3) % vocab for i in range(PROBE_PROMPT)), PROBE_TOKENS)
    got = [decoder_class(loaded, kernels=k, kernel_probe=False, graphs="off", eos_ids=()).generate([req])[0].tokens
           for k in (kernels, "torch")]
    ok = got[0] == got[1]
    (log.info if ok else log.warning)("decoder: decode steps %s the decode-attention kernel (its probe %s the "
                                      "eager path's tokens)", "through" if ok else "without",
                                      "gave" if ok else "did not give")
    return ok
