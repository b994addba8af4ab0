"""Additive attention masks for the engine's tree rows and the decoder's slots, per layer type.

Both build a boolean `hide` [b, q, k] (keys a query must not see: other branches, padding,
later tokens) and hand it here with every query's and key's position. A model whose layers
all attend causally gets one additive mask. One with sliding-window layers (Mistral, Gemma 2/3,
Qwen2/3 with use_sliding_window) also hides, on those layers, every key at least `window`
positions behind the query, as transformers' own sliding-window mask does
(`kv > q - window`); where layer types differ the model takes a dict {layer type: mask}.
"""
from __future__ import annotations


def layer_masks(hide, qpos, kpos, windows: dict, dtype):
    """hide [b, q, k] bool, qpos [b, q], kpos [b, k] (positions; None when no layer has a window)
    -> attention_mask: one [b, 1, q, k] additive mask (0 visible, dtype min hidden), or
    {layer type: mask} when the model's layer types see different keys."""
    built = {}
    for w in set(windows.values()):
        h = hide if w is None else hide | (qpos[:, :, None] - kpos[:, None, :] >= w)
        built[w] = _additive(h, dtype)
    if len(built) == 1:
        return next(iter(built.values()))
    return {t: built[w] for t, w in windows.items()}


def windowed(windows: dict) -> bool:
    return any(w is not None for w in windows.values())


def _additive(hide, dtype):
    import torch
    return torch.zeros(hide.shape, dtype=dtype, device=hide.device).masked_fill_(hide, torch.finfo(dtype).min)[:, None]
