"""Prefix-shared batched engine: token ids in, verdict log-probabilities out.

Knows nothing about prompts or labels. Each group of queries (one pair's prompts) becomes a
radix tree over token ids (prefix_tree.py). Trees of many groups are prefilled level by
level: every node is computed once, over the KV of its ancestors, which is held per node and
never recomputed. Rows of one level are batched: ancestors' KV left-padded to the longest
past, new tokens right-padded, a 2-D mask hiding the past padding, and explicit position ids
(real past length + offset). Causal attention makes right padding exact, and masked keys get
exactly zero weight, so every real token sees exactly its own prefix. Verdicts are read at
node ends from the final normed hidden state and the gathered LM-head rows only.

Memory: groups are taken in waves whose held KV fits `kv_budget_bytes`; rows of a level are
chunked so one forward's activations fit `activation_budget_bytes` (and `batch_tokens`).
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from baer_fast.runtime.config import EngineConfig
from baer_fast.runtime.prefix_tree import Node, build_tree, subtree_depth, tree_tokens
from baer_fast.runtime.queries import EngineResult, EngineStats, Query
from baer_fast.runtime.readout import lm_head, read_choices


PAD_SLACK = 1.25     # a chunk may compute at most 25% more tokens than it has real ones...
PAD_FREE = 64        # ...plus this many, so short suffixes still batch together


@dataclass
class _Row:
    g: int                  # group index
    node: Node
    nid: int                # node index within its group's tree
    chain: list             # ancestors' node indices, root first

    @property
    def n(self) -> int:
        return len(self.node.tokens)


class PrefixEngine:
    def __init__(self, loaded, config: EngineConfig = EngineConfig()):
        self.loaded, self.config = loaded, config
        cfg = loaded.model.config.get_text_config()
        self._layers = cfg.num_hidden_layers
        self._heads = cfg.num_attention_heads
        elem = loaded.dtype.itemsize
        # activation bytes per token in one forward: residual/attention/MLP buffers (rough upper bound)
        self._act_per_token = elem * (8 * cfg.hidden_size + 3 * cfg.intermediate_size)
        self._pad_id = int(getattr(loaded.tokenizer, "pad_token_id", None) or 0)

    # ------------------------------------------------------------------ planning
    def plan_tokens(self, groups: list[list[Query]]) -> list[int]:
        """Tokens this engine prefills per group: each tree node once."""
        return [tree_tokens(build_tree([q.ids for q in group])) for group in groups]

    def _waves(self, trees) -> list[list[int]]:
        kvb, budget = self.loaded.kv_bytes_per_token, self.config.kv_budget_bytes
        waves, cur, held = [], [], 0
        for g, nodes in enumerate(trees):
            need = kvb * sum(len(n.tokens) for n in nodes if n.children)
            if cur and held + need > budget:
                waves.append(cur)
                cur, held = [], 0
            cur.append(g)
            held += need
        return waves + ([cur] if cur else [])

    def _chunks(self, rows: list[_Row]) -> list[list[_Row]]:
        rows = sorted(rows, key=lambda r: (r.n, r.node.past))
        budget, cap = self.config.activation_budget_bytes, self.config.batch_tokens
        chunks, cur, n_max, p_max, real = [], [], 0, 0, 0
        for r in rows:
            n2, p2 = max(n_max, r.n), max(p_max, r.node.past)
            b2 = len(cur) + 1
            too_big = self._cost(b2, n2, p2) > budget or (cap and b2 * n2 > cap)
            # rows come sorted by length: a long row after short ones would mostly compute padding
            wasteful = b2 * n2 > PAD_SLACK * (real + r.n) + PAD_FREE
            if cur and (too_big or wasteful):
                chunks.append(cur)
                cur, n2, p2, real = [], r.n, r.node.past, 0
            cur.append(r)
            n_max, p_max, real = n2, p2, real + r.n
        return chunks + ([cur] if cur else [])

    def _cost(self, b: int, n: int, p: int) -> int:
        scores = b * self._heads * n * (p + n) * 4               # attention probabilities, fp32
        past = b * (p + n) * self.loaded.kv_bytes_per_token      # gathered ancestor KV + room for new
        return b * n * self._act_per_token + scores + past

    # ------------------------------------------------------------------ running
    def run(self, groups: list[list[Query]]) -> EngineResult:
        import torch
        t0, stats = time.perf_counter(), EngineStats()
        trees = [build_tree([q.ids for q in group]) for group in groups]
        out = [[None] * len(group) for group in groups]
        with torch.inference_mode():
            for wave in self._waves(trees):
                self._run_wave(wave, trees, groups, out, stats)
        stats.seconds = time.perf_counter() - t0
        return EngineResult(out, [tree_tokens(t) for t in trees], stats)

    def _run_wave(self, wave, trees, groups, out, stats: EngineStats) -> None:
        kv: dict[tuple[int, int], list] = {}          # (group, node) -> per-layer (K, V) [kvh, n, hd]
        deepest = {g: subtree_depth(trees[g]) for g in wave}
        levels: dict[int, list[_Row]] = {}
        for g in wave:
            for i, node in enumerate(trees[g]):
                levels.setdefault(node.depth, []).append(_Row(g, node, i, _chain(trees[g], i)))
        for depth in sorted(levels):
            for chunk in self._chunks(levels[depth]):
                self._forward(chunk, kv, groups, out, stats)
            stats.kv_bytes_peak = max(stats.kv_bytes_peak, self._held(kv))
            for key in [k for k in kv if deepest[k[0]][k[1]] <= depth]:
                del kv[key]                            # every descendant is computed

    def _held(self, kv) -> int:
        return sum(2 * k.numel() * k.element_size() for layers in kv.values() for k, _ in layers)

    def _forward(self, rows: list[_Row], kv, groups, out, stats: EngineStats) -> None:
        import torch
        dev = self.loaded.device
        b, n, p = len(rows), max(r.n for r in rows), max(r.node.past for r in rows)
        ids = torch.full((b, n), self._pad_id, dtype=torch.long)
        mask = torch.zeros((b, p + n), dtype=torch.long)
        for i, r in enumerate(rows):
            ids[i, : r.n] = torch.tensor(r.node.tokens)
            mask[i, p - r.node.past: p + r.n] = 1       # real past (right-aligned) + real new tokens
        pos = torch.tensor([[r.node.past] for r in rows]) + torch.arange(n)      # [b, n]
        cache = self._gather_past(rows, kv, p, n)
        # Without past padding the mask adds nothing: right padding is invisible to real tokens under
        # causal attention. Dropping it lets SDPA take its causal fast path (e.g. every root level).
        no_past_pad = all(r.node.past == p for r in rows)
        res = self.loaded.base(input_ids=ids.to(dev), attention_mask=None if no_past_pad else mask.to(dev),
                               position_ids=pos.to(dev), use_cache=True, **{self.loaded.cache_arg: cache})
        self._keep_kv(rows, cache, p, kv)
        self._read(rows, res.last_hidden_state, groups, out)   # hidden: [b, n, H]
        stats.tokens_prefilled += sum(r.n for r in rows)
        stats.tokens_computed += b * n
        stats.forwards += 1
        stats.kv_bytes_peak = max(stats.kv_bytes_peak, self._held(kv) + b * (p + n) * self.loaded.kv_bytes_per_token)

    def _gather_past(self, rows: list[_Row], kv, p: int, room: int):
        """A cache holding each row's ancestors' KV, left-padded to p: [b, kvh, p, hd] per layer.

        The past is written straight into buffers with `room` free slots for the new tokens
        (past_cache.py). Rows with the same parent (siblings: a node's protocol suffixes) get
        the past assembled once and copied to the other siblings with one index_copy.
        """
        import torch
        from transformers import DynamicCache

        from baer_fast.runtime.past_cache import inplace_cache
        if p == 0:
            return DynamicCache()
        first_row: dict[tuple[int, int], int] = {}
        for i, r in enumerate(rows):
            first_row.setdefault((r.g, r.chain[-1]), i)
        dup = [(i, first_row[(r.g, r.chain[-1])]) for i, r in enumerate(rows) if first_row[(r.g, r.chain[-1])] != i]
        ref = kv[(rows[0].g, rows[0].chain[0])][0][0]
        shape = (len(rows), ref.shape[0], p + room, ref.shape[2])
        bufs = []
        for layer in range(self._layers):
            k = torch.empty(shape, dtype=ref.dtype, device=ref.device)
            v = torch.empty_like(k)
            for i in first_row.values():
                self._write_past(rows[i], kv, layer, k[i], v[i], p)
            if dup:
                to = torch.tensor([i for i, _ in dup], device=ref.device)
                src = torch.tensor([j for _, j in dup], device=ref.device)
                k[:, :, :p].index_copy_(0, to, k[:, :, :p].index_select(0, src))
                v[:, :, :p].index_copy_(0, to, v[:, :, :p].index_select(0, src))
            bufs.append((k, v))
        cache = inplace_cache(bufs, p)
        if cache is None:                       # stock cache: same values, one more copy
            cache = DynamicCache()
            for layer, (k, v) in enumerate(bufs):
                cache.update(k[:, :, :p].contiguous(), v[:, :, :p].contiguous(), layer)
        return cache

    @staticmethod
    def _write_past(r: _Row, kv, layer: int, k, v, p: int) -> None:
        """k, v: [kvh, p + room, hd] of one row; zero the left padding (masked, but must be finite)."""
        at = p - r.node.past
        k[:, :at].zero_()
        v[:, :at].zero_()
        for anc in r.chain:
            ka, va = kv[(r.g, anc)][layer]
            k[:, at: at + ka.shape[1]] = ka
            v[:, at: at + ka.shape[1]] = va
            at += ka.shape[1]

    def _keep_kv(self, rows: list[_Row], cache, p: int, kv) -> None:
        """Store each inner node's own new KV (leaves are never a past, so nothing is kept)."""
        keep = [(i, r) for i, r in enumerate(rows) if r.node.children]
        if not keep:
            return
        layers = [_layer_kv(cache, layer) for layer in range(self._layers)]
        for i, r in keep:
            kv[(r.g, r.nid)] = [(k[i, :, p: p + r.n].clone(), v[i, :, p: p + r.n].clone()) for k, v in layers]

    def _read(self, rows: list[_Row], hidden, groups, out) -> None:
        import torch
        want = [(i, r, q) for i, r in enumerate(rows) for q in r.node.ends]
        if not want:
            return
        weight, bias = lm_head(self.loaded.model)
        by_choices: dict[tuple, list] = {}
        for i, r, q in want:
            by_choices.setdefault(groups[r.g][q].choices, []).append((i, r, q))
        for choices, items in by_choices.items():
            h = hidden[[i for i, _, _ in items], [r.n - 1 for _, r, _ in items]]          # [m, H]
            ids = torch.tensor(choices, dtype=torch.long, device=h.device)
            lp = read_choices(h, weight, ids, bias=bias, kernels=self.config.kernels).double().cpu()
            for row, (_, r, q) in zip(lp.tolist(), items):
                out[r.g][q] = row


def _chain(nodes: list[Node], i: int) -> list[int]:
    chain, p = [], nodes[i].parent
    while p >= 0:
        chain.append(p)
        p = nodes[p].parent
    return chain[::-1]


def _layer_kv(cache, layer: int):
    """(keys, values) [b, kvh, t, hd] of one cache layer, across transformers 5.x layouts."""
    if hasattr(cache, "layers"):
        return cache.layers[layer].keys, cache.layers[layer].values
    return cache.key_cache[layer], cache.value_cache[layer]
