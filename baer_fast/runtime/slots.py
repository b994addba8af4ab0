"""The decoder's slot buffers: per layer K, V [slots, kv heads, columns, head dim], allocated once.

Knows nothing about requests or sampling. A row's KV lives in one slot, contiguous from column
0 (column j holds position j). `SlotBuffers.size` sizes them within a memory budget: every slot
as wide as the widest row the decoder will hold, as many slots as the budget holds at that
width after the forwards' activations (never fewer than one request's samples). The buffers
are zeroed once when allocated (masked columns must be finite under an additive mask) and
reused as rows come and go; slot moves are batched gathers, one per buffer.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

log = logging.getLogger("baer_fast")


@dataclass(frozen=True)
class SlotPlan:
    slots: int                  # rows in flight at most
    columns: int                # columns of every slot
    bytes: int                  # K and V of every layer at that shape


def plan_slots(*, budget: int, need_columns: int, rows_wanted: int, rows_min: int, kv_bytes_per_token: int,
               reserve: int) -> SlotPlan:
    """Slots of `need_columns` columns within budget - reserve (activations, exported KV)."""
    per_slot = max(1, need_columns * kv_bytes_per_token)
    fit = max(0, budget - reserve) // per_slot
    slots = max(min(rows_wanted, fit), rows_min, 1)
    if slots > fit:
        log.warning("decoder: one request's %d samples x %d columns need %.2f GiB of slot KV, above the %.2f GiB "
                    "left of the memory budget", rows_min, need_columns, slots * per_slot / 2**30,
                    max(0, budget - reserve) / 2**30)
    return SlotPlan(slots, need_columns, slots * per_slot)


def activation_bytes(loaded, *, tokens: int, rows: int, columns: int) -> int:
    """A bound on one forward's transient memory: a prefill of `tokens` new tokens (hidden
    states, the MLP's intermediate, q/k/v, the masked attention's scores over `columns`), or a
    decode step of `rows` rows with full-vocabulary logits and the sampler's copies of them."""
    cfg = loaded.model.config.get_text_config()
    elt = loaded.dtype.itemsize
    hidden, inter = cfg.hidden_size, getattr(cfg, "intermediate_size", 4 * cfg.hidden_size)
    heads, vocab = cfg.num_attention_heads, cfg.vocab_size
    from baer_fast.runtime.plan.chunks import QUERY_SLICE
    per_token = (6 * hidden + 3 * inter) * elt
    scores = min(tokens, QUERY_SLICE * max(1, tokens // QUERY_SLICE)) * heads * columns * 4
    step = rows * vocab * (4 * 3 + 8 * 2)           # logits, probs, scaled (fp32); kept, cdf (fp64)
    return tokens * per_token + scores + step


class SlotBuffers:
    """K, V per layer over `plan.slots` slots of `plan.columns` columns, zeroed once."""

    def __init__(self, loaded, plan: SlotPlan, layers: int):
        import torch
        dev, dt = loaded.device, loaded.dtype
        self.bufs = [tuple(torch.zeros((plan.slots, heads, plan.columns, dim), dtype=dt, device=dev)
                           for heads, dim in loaded.kv_shape()) for _ in range(layers)]
        self.device = dev
        self.bytes = sum(t.numel() * t.element_size() for kv in self.bufs for t in kv)

    @property
    def columns(self) -> int:
        return self.bufs[0][0].shape[2]

    def copy(self, src: list[int], dst: list[int], n: int) -> None:
        """Columns [:n] of slots src -> slots dst, one gather and scatter per buffer."""
        import torch
        if not src or n <= 0:
            return
        s, d = torch.tensor(src, device=self.device), torch.tensor(dst, device=self.device)
        for k, v in self.bufs:
            for buf in (k, v):
                buf[d, :, :n] = buf[s, :, :n]

    def permute(self, order: list[int], n: int) -> None:
        """Slot j takes what slot order[j] holds (columns [:n]), for j < len(order)."""
        self.copy(list(order), list(range(len(order))), n)

    def prefix(self, slot: int, n: int):
        """(K, V) [layers, heads, n, dim] of one slot's first n columns (copies)."""
        import torch
        return tuple(torch.stack([kv[t][slot, :, :n] for kv in self.bufs]) for t in (0, 1))

    def cache(self, slots, cols, width: int) -> "SlotCache":
        return SlotCache(self.bufs, slots, cols, width)


class SlotCache:
    """Duck-typed transformers cache over the slot buffers: the rows' slots (a contiguous run
    [first, first + k), or any k slots given as a list) write their new tokens at their own
    columns `cols` [k, q] and attend over columns [0, width)."""

    def __init__(self, bufs, slots, cols, width: int):
        self.bufs, self.slots, self.cols, self.width = bufs, slots, cols, width
        self._rows = self._index = None

    def update(self, key_states, value_states, layer_idx, *args, **kwargs):
        import torch
        k, v = self.bufs[layer_idx]
        n = key_states.shape[0]
        if self._rows is None:
            if isinstance(self.slots, int):
                self._rows = torch.arange(self.slots, self.slots + n, device=k.device)[:, None]
            else:
                self._index = torch.tensor(self.slots, device=k.device)
                self._rows = self._index[:, None]
        # key_states: [n, kvh, q, hd] -> k[slot, :, col] for every (slot, col) pair, as [n, q, kvh, hd]
        k[self._rows, :, self.cols] = key_states.transpose(1, 2)
        v[self._rows, :, self.cols] = value_states.transpose(1, 2)
        if self._index is not None:          # scattered slots: gather their columns (a copy)
            return k[:, :, : self.width].index_select(0, self._index), v[:, :, : self.width].index_select(0, self._index)
        end = self.slots + n
        return k[self.slots: end, :, : self.width], v[self.slots: end, :, : self.width]

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.width - 1
