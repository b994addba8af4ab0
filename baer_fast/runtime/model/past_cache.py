"""A transformers cache pre-filled with a batch's past KV, with room for the new tokens.

The stock DynamicLayer appends by torch.cat, copying the whole past again at every layer of
every forward. Here each layer owns one buffer [b, kvh, p + room, hd]: the engine writes the
past straight into it and update() writes the new keys/values in place. Given `starts`, each
row's new keys go right after its own past (row i at starts[i] onward) instead of all at p, so
a row's real keys sit at the same columns whatever the batch's longest past: attention sums
see the same layout in any batch. Where the installed transformers' layer API differs,
`inplace_cache` returns None and the engine uses the stock cache instead (same results up to
rounding, more copying).
"""
from __future__ import annotations

import functools


ONE_SCATTER = None     # rows' new KV at their own columns: None = one indexed write on a GPU, row copies on CPU


def _one_scatter(buf) -> bool:
    return buf.device.type != "cpu" if ONE_SCATTER is None else ONE_SCATTER


@functools.lru_cache(maxsize=1)
def _layer_class():
    from transformers.cache_utils import DynamicLayer

    class InPlaceLayer(DynamicLayer):
        def __init__(self, k_buf, v_buf, past: int, starts=None):
            super().__init__()
            self._k, self._v, self._len = k_buf, v_buf, past
            # starts: per-row column of the first new token; None (or all equal to past): every row at `past`
            self._starts = None if starts is None or set(starts) == {past} else list(starts)
            self._new = 0
            self.device = k_buf.device
            self.is_initialized = True
            self.keys, self.values = k_buf[:, :, :past], v_buf[:, :, :past]

        def update(self, key_states, value_states, *args, **kwargs):
            end = self._len + key_states.shape[-2]
            if end > self._k.shape[-2]:
                return super().update(key_states, value_states, *args, **kwargs)
            if self._starts is None:
                self._k[:, :, self._len: end] = key_states
                self._v[:, :, self._len: end] = value_states
            elif not _one_scatter(self._k):           # row by row: plain copies beat one scatter on CPU
                q = key_states.shape[-2]
                for i, at in enumerate(self._starts):
                    self._k[i, :, at + self._new: at + self._new + q] = key_states[i]
                    self._v[i, :, at + self._new: at + self._new + q] = value_states[i]
            else:                                     # one indexed write per buffer (one launch on a GPU)
                import torch
                q, dev = key_states.shape[-2], self._k.device
                rows = torch.arange(len(self._starts), device=dev)[:, None]
                cols = torch.tensor(self._starts, device=dev)[:, None] + self._new + torch.arange(q, device=dev)
                self._k[rows, :, cols] = key_states.transpose(1, 2)
                self._v[rows, :, cols] = value_states.transpose(1, 2)
            self._len, self._new = end, self._new + key_states.shape[-2]
            self.keys, self.values = self._k[:, :, :end], self._v[:, :, :end]
            return self.keys, self.values

    return InPlaceLayer


def inplace_cache(bufs: list, past: int, starts=None):
    """bufs: per layer (K, V) [b, kvh, p + room, hd] -> a cache of length `past`, or None.

    starts: per row, the column of its first new token (its own past length, the past written
    left-aligned); None puts every row's new tokens at `past`.
    """
    try:
        from transformers import DynamicCache
        cache = DynamicCache()
        if not hasattr(cache, "layers"):
            return None
        cls = _layer_class()
        cache.layers = [cls(k, v, past, starts) for k, v in bufs]
        if cache.get_seq_length() != past:
            return None
        return cache
    except (ImportError, AttributeError, TypeError):
        return None
