"""The judge's FLOP model, counted from its weights and config (see queries.FlopModel)."""
from __future__ import annotations

from baer_fast.runtime.model.load import config_kv_dims, text_config
from baer_fast.runtime.queries import FlopModel


def flop_model(loaded):
    """The judge's FlopModel (queries.py): its decoder matrices, counted from the weights (an MoE
    expert's at its routed share, top-k of the experts; shared experts in full), and 2 x (query-key
    dim + value dim) per query head and layer for each attention score: the attention's own widths,
    not the cache's, which an MLA judge holds compressed."""
    import torch

    cfg = text_config(loaded.model.config)
    top_k = getattr(cfg, "num_experts_per_tok", None)
    experts = (getattr(cfg, "num_experts", None) or getattr(cfg, "num_local_experts", None)
               or getattr(cfg, "n_routed_experts", None))
    weights = 0.0
    for mod_name, mod in loaded.base.named_modules():
        if isinstance(mod, torch.nn.Embedding):
            continue
        for name, prm in mod.named_parameters(recurse=False):
            if prm.ndim < 2 or "bias" in name:
                continue                                   # norms, biases (an MoE's are 2-D): lower order
            full = f"{mod_name}.{name}"
            routed = top_k and experts and ".experts." in f".{full}" and "shared_expert" not in full
            weights += prm.numel() * (top_k / experts if routed else 1)
    head = config_kv_dims(cfg)[0][1]
    nope, rope = getattr(cfg, "qk_nope_head_dim", None), getattr(cfg, "qk_rope_head_dim", None)
    dk = nope + rope if nope and rope else head              # MLA: queries meet keys over nope + rope dims...
    dv = getattr(cfg, "v_head_dim", None) or head            # ...and weight values of their own width
    return FlopModel(round(weights), 2 * cfg.num_hidden_layers * cfg.num_attention_heads * (dk + dv))
