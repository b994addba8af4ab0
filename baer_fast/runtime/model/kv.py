"""KV cache access shared by the loader, the prefix engine and the tests."""
from __future__ import annotations


def layer_kv(cache, layer: int):
    """(keys, values) [b, kvh, t, hd] of one cache layer, across transformers 5.x layouts."""
    if hasattr(cache, "layers"):
        return cache.layers[layer].keys, cache.layers[layer].values
    return cache.key_cache[layer], cache.value_cache[layer]
