"""A transformers cache pre-filled with a batch's past KV, with room for the new tokens.

The stock DynamicLayer appends by torch.cat, copying the whole past again at every layer of
every forward. Here each layer owns one buffer [b, kvh, p + room, hd]: the engine writes the
past straight into it and update() writes the new keys/values in place. Where the installed
transformers' layer API differs, `inplace_cache` returns None and the engine uses the stock
cache instead (same results, more copying).
"""
from __future__ import annotations

import functools


@functools.lru_cache(maxsize=1)
def _layer_class():
    from transformers.cache_utils import DynamicLayer

    class InPlaceLayer(DynamicLayer):
        def __init__(self, k_buf, v_buf, past: int):
            super().__init__()
            self._k, self._v, self._len = k_buf, v_buf, past
            self.device = k_buf.device
            self.is_initialized = True
            self.keys, self.values = k_buf[:, :, :past], v_buf[:, :, :past]

        def update(self, key_states, value_states, *args, **kwargs):
            end = self._len + key_states.shape[-2]
            if end > self._k.shape[-2]:
                return super().update(key_states, value_states, *args, **kwargs)
            self._k[:, :, self._len: end] = key_states
            self._v[:, :, self._len: end] = value_states
            self._len = end
            self.keys, self.values = self._k[:, :, :end], self._v[:, :, :end]
            return self.keys, self.values

    return InPlaceLayer


def inplace_cache(bufs: list, past: int):
    """bufs: per layer (K, V) [b, kvh, p + room, hd] with the past in [:, :, :past] -> a cache, or None."""
    try:
        from transformers import DynamicCache
        cache = DynamicCache()
        if not hasattr(cache, "layers"):
            return None
        cls = _layer_class()
        cache.layers = [cls(k, v, past) for k, v in bufs]
        if cache.get_seq_length() != past:
            return None
        return cache
    except (ImportError, AttributeError, TypeError):
        return None
