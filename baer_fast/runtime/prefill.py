"""Prefix-shared batched engine: token ids in, verdict log-probabilities out.

Knows nothing about prompts or labels. Each group of queries (one pair's prompts) becomes a
radix tree over token ids (plan/prefix_tree.py); every node is computed once, over the KV of its
ancestors, which is held per node and never recomputed. A row computes one node or several
packed siblings (a 4-D mask keeps every token to its own prefix), rows run level by level in
chunks bounded by model FLOPs (plan/chunks.py), masked forwards in query slices and width groups
(plan/width_groups.py); verdicts are read at node ends from the gathered LM-head rows only.
Groups run in waves whose held KV fits `kv_budget_bytes`; one forward fits
`activation_budget_bytes`. `run(groups, given, keep)` also takes prefix KV computed elsewhere
(the decoder's [system][question][A][B], an earlier call's) and hands back the KV of the prefixes
in `keep` (a cascade's next stage reads it). The design in full: docs/architecture.md.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from baer_fast.runtime.plan import chunks, width_groups
from baer_fast.runtime.plan.chunks import flop_chunks, forward_scores, query_slices
from baer_fast.runtime.config import EngineConfig
from baer_fast.runtime.model.masks import layer_masks, windowed
from baer_fast.runtime.model.flops import flop_model
from baer_fast.runtime.model.kv import layer_kv
from baer_fast.runtime.plan.prefix_tree import Node, ancestors, build_tree, subtree, tree_tokens
from baer_fast.runtime.queries import EngineResult, EngineStats, Query
from baer_fast.runtime.model.readout import read_rows


log = logging.getLogger("baer_fast")

KEEP = 1 << 30       # last_use of a kept prefix's nodes: past every level of a wave
COPY_COST = 16       # one past token's KV copied into a row costs about as much as 16 attention scores


@dataclass
class _Row:
    g: int                  # group index
    nodes: list[int]        # packed node indices within the group's tree, depth-first
    offs: list[int]         # column of each packed node's first token among the row's new tokens
    lens: list[int]         # tokens of each packed node
    ends: list[int]         # column just past each packed node's subtree within the row
    chain: list[int]        # the past: ancestors shared by every packed node, root first
    past: int               # tokens in the past
    n: int                  # new tokens
    depth: int              # level: depth of the packed roots


class PrefixEngine:
    kind = "prefix"              # capabilities: see interfaces.Engine
    takes_prefix_kv = True        # run(groups, given=...): handed-in prefix KV (run_generative asks)
    shares_prefixes = True

    def __init__(self, loaded, config: EngineConfig = EngineConfig()):
        self.loaded, self.config = loaded, config
        cfg = loaded.model.config.get_text_config()
        self._layers = cfg.num_hidden_layers
        self._heads = cfg.num_attention_heads
        elem = loaded.dtype.itemsize
        # activation bytes per token in one forward: residual/attention/MLP buffers (rough upper bound)
        self._act_per_token = elem * (8 * cfg.hidden_size + 3 * cfg.intermediate_size)
        self._pad_id = int(getattr(loaded.tokenizer, "pad_token_id", None) or 0)
        self._masks = len(set(loaded.windows.values()))       # distinct masks per call (sliding-window layers)
        self._fm = flop_model(loaded)
        # masked forwards attend in width groups (width_groups.py); a further group's fixed cost in scores
        self._penalty = width_groups.group_cost(loaded, config.split_attention)
        # KV bytes held outside this engine's calls for later ones (bank/prefix_store.py): waves plan
        # within what is left of the KV budget
        self.held_outside = 0
        self.prefix_store = None     # a cascade's PrefixStore while its stages run (bank/prefix_store.keeping)

    # ------------------------------------------------------------------ planning
    def plan_tokens(self, groups: list[list[Query]]) -> list[int]:
        """Tokens this engine prefills per group: each tree node once."""
        return [tree_tokens(build_tree([q.ids for q in group])) for group in groups]

    def _plan(self, g: int, nodes: list[Node], given=()) -> list[_Row]:
        """Rows computing every node not in `given` (nodes whose KV is handed in): the roots, and
        below each given node its other children, are planned as sibling sets."""
        sets = [[i for i, nd in enumerate(nodes) if nd.parent < 0 and i not in given]]
        sets += [[c for c in nodes[x].children if c not in given] for x in sorted(given)]
        return [self._row(g, nodes, packed) for kids in sets if kids
                for packed in self._plan_siblings(nodes, kids)[0]]

    def _plan_siblings(self, nodes: list[Node], kids: list[int]) -> tuple[list[list[int]], float]:
        """Rows (packed nodes, depth-first) computing the subtrees below siblings `kids`, and their cost.

        Each sibling becomes a unit: its whole subtree packed, when that row fits the budget and
        costs no more than the sibling alone plus the best plan below it; else the sibling alone,
        its children planned the same way. Units are then packed together where that costs no more.
        """
        units, rows, cost = [], [], 0.0
        for c in kids:
            below, below_cost = self._plan_siblings(nodes, nodes[c].children) if nodes[c].children else ([], 0.0)
            whole = subtree(nodes, c)
            if len(whole) > 1 and self._fits(nodes, whole) and \
                    self._row_cost(nodes, whole) <= self._row_cost(nodes, [c]) + below_cost:
                units.append(whole)
            else:
                units.append([c])
                rows, cost = rows + below, cost + below_cost
        packed = self._pack_units(nodes, units)
        return rows + packed, cost + sum(self._row_cost(nodes, r) for r in packed)

    def _pack_units(self, nodes: list[Node], units: list[list[int]]) -> list[list[int]]:
        units = sorted(units, key=lambda u: _tokens(nodes, u))
        rows, cur = [], []
        for u in units:
            both = cur + u
            if cur and self._fits(nodes, both) and \
                    self._row_cost(nodes, both) <= self._row_cost(nodes, cur) + self._row_cost(nodes, u):
                cur = both
            else:
                rows += [cur] if cur else []
                cur = u
        return rows + ([cur] if cur else [])

    def _row_cost(self, nodes: list[Node], packed: list[int]) -> float:
        """Attention scores a row computes (dense under a mask) plus its past copy, in score units."""
        n, p = _tokens(nodes, packed), nodes[packed[0]].past
        return forward_scores(1, n, p, p == 0 and len(packed) == 1) + COPY_COST * p

    def _fits(self, nodes: list[Node], packed: list[int]) -> bool:
        n, cap = _tokens(nodes, packed), self.config.batch_tokens
        return self._cost(1, n, nodes[packed[0]].past) <= self.config.activation_budget_bytes and not (cap and n > cap)

    def _row(self, g: int, nodes: list[Node], packed: list[int]) -> _Row:
        offs, at = [], 0
        for i in packed:
            offs.append(at)
            at += len(nodes[i].tokens)
        col = dict(zip(packed, offs))
        ends = [col[i] + _tokens(nodes, [j for j in subtree(nodes, i) if j in col]) for i in packed]
        first = nodes[packed[0]]
        return _Row(g, packed, offs, [len(nodes[i].tokens) for i in packed], ends,
                    ancestors(nodes, packed[0]), first.past, at, first.depth)

    def _waves(self, plans, trees, kept=None) -> list[list[int]]:
        """Groups in waves whose held KV fits the KV budget less what is held outside the call and what
        earlier waves hand back (kept: per group, tokens of its kept prefixes' KV)."""
        kvb, budget = self.loaded.kv_bytes_per_token, self.config.kv_budget_bytes - self.held_outside
        waves, cur, held = [], [], 0
        for g, rows in enumerate(plans):
            need = kvb * sum(len(trees[g][i].tokens) for i in _kept(rows))
            if cur and held + need > budget:
                waves.append(cur)
                budget -= kvb * sum(kept[x] for x in cur) if kept else 0
                cur, held = [], 0
            cur.append(g)
            held += need
        return waves + ([cur] if cur else [])

    def _chunks(self, rows: list[_Row]) -> list[list[_Row]]:
        budget, cap = self.config.activation_budget_bytes, self.config.batch_tokens
        return flop_chunks(rows, lambda r: r.n, lambda r: r.past, self._fm,
                           lambda b, n, p: self._cost(b, n, p) <= budget and not (cap and b * n > cap),
                           lambda r: r.past == 0 and len(r.nodes) == 1)

    def _cost(self, b: int, n: int, p: int) -> int:
        """Peak bytes of one forward over b rows of n new tokens after a past of p (upper bound)."""
        elem, c = self.loaded.dtype.itemsize, min(n, chunks.QUERY_SLICE) if p else n   # queries per model call
        scores = b * self._heads * c * (p + n) * 4               # attention probabilities, fp32
        mask = b * c * (p + n) * (elem + 2) * self._masks          # additive mask(s) + their bool sources
        past = b * (p + n) * self.loaded.kv_bytes_per_token      # gathered ancestor KV + room for new
        hidden = b * n * self._act_per_token // 8                 # final hidden states of every slice
        return b * c * self._act_per_token + scores + mask + past + hidden

    # ------------------------------------------------------------------ running
    def run(self, groups: list[list[Query]], given=None, keep=None) -> EngineResult:
        """groups -> per group, per query, its log-probs. given: per group, (prefix ids, K, V) whose
        KV [layers, kvh, len(prefix), hd] was computed elsewhere (the decoder's prefill of the
        same tokens, an earlier call's `kept`): the tree nodes it covers are not computed again
        (_given). keep: per group, prefixes (token-id tuples) whose KV to hand back in the
        result's `kept` {prefix: (K, V)}: those that some query of the group extends and that are
        not handed in."""
        import torch
        t0, stats = time.perf_counter(), EngineStats()
        trees, gives, keeps = [], [], []
        for g, group in enumerate(groups):
            ids = [q.ids for q in group]

            def extended(p, ids=ids):
                return any(len(q) > len(p) and q[:len(p)] == p for q in ids)
            # each handed-in or kept prefix some query extends joins the tree as a sequence (never
            # read), so its end is a node boundary
            used = [x for x in given[g] if extended(x[0])] if given is not None and given[g] else []
            handed = {p for p, _, _ in used}
            wanted = [p for p in dict.fromkeys(keep[g]) if p not in handed and extended(p)] \
                if keep is not None and keep[g] else []
            nodes = build_tree(ids + [p for p, _, _ in used] + wanted)
            trees.append(nodes)
            gives.append(_given(nodes, len(ids), used))
            keeps.append(_paths(nodes, len(ids) + len(used), wanted))
        plans = [self._plan(g, nodes, gives[g].keys()) for g, nodes in enumerate(trees)]
        out = [[None] * len(group) for group in groups]
        kept: dict = {}
        with torch.inference_mode():
            for wave in self._waves(plans, trees, [sum(map(len, k)) for k in keeps]):
                self._run_wave([r for g in wave for r in plans[g]], trees, groups, out, stats, gives,
                               {g: keeps[g] for g in wave if keeps[g]}, kept)
        stats.seconds = time.perf_counter() - t0
        handed = [sum(len(trees[g][x].tokens) for x in cover) for g, cover in enumerate(gives)]
        return EngineResult(out, [tree_tokens(t) - h for t, h in zip(trees, handed)], stats, kept)

    def _run_wave(self, rows: list[_Row], trees, groups, out, stats: EngineStats, gives=None, keeps=None,
                  kept=None) -> None:
        """keeps: {group: {prefix: its path of nodes}} whose KV to put in `kept` {prefix: (K, V)}."""
        kv: dict[tuple[int, int], tuple] = {}         # (group, node) -> (K, V) [layers, kvh, n, hd]
        last_use: dict[tuple[int, int], int] = {}     # (group, node) -> last level whose rows read its KV
        levels: dict[int, list[_Row]] = {}
        for r in rows:
            levels.setdefault(r.depth, []).append(r)
            for a in r.chain:
                last_use[(r.g, a)] = max(last_use.get((r.g, a), -1), r.depth)
        for g, paths in (keeps or {}).items():       # a kept prefix's nodes stay to the end of the wave
            last_use.update(((g, x), KEEP) for path in paths.values() for x in path)
        for g in {r.g for r in rows} if gives else ():
            kv.update(((g, x), slices) for x, slices in gives[g].items() if (g, x) in last_use)
        for depth in sorted(levels):
            for chunk in self._chunks(levels[depth]):
                self._forward(chunk, trees, kv, last_use, groups, out, stats)
            stats.kv_bytes_peak = max(stats.kv_bytes_peak, self._held(kv))
            for key in [k for k in kv if last_use[k] <= depth]:
                del kv[key]                            # every row reading it is computed
        for g, paths in (keeps or {}).items():
            import torch
            for prefix, path in paths.items():
                kept[prefix] = tuple(torch.cat([kv[(g, x)][t] for x in path], dim=2) for t in (0, 1))

    def _held(self, kv) -> int:
        return sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in kv.values())

    def _forward(self, rows: list[_Row], trees, kv, last_use, groups, out, stats: EngineStats) -> None:
        """One chunk's forward (_forward_chunk). A forward that cannot take the width-group
        attention (remote code picking its own attention classes by name) is rerun whole in one
        width, with a fresh cache (nothing is kept or read before every slice ran), and so is
        every later one of this engine."""
        if self._penalty is None:
            return self._forward_chunk(rows, trees, kv, last_use, groups, out, stats)
        try:
            return self._forward_chunk(rows, trees, kv, last_use, groups, out, stats)
        except Exception as exc:
            log.warning("masked forwards in one width for %s: its forward failed with width groups (%s: %s)",
                        self.loaded.name, type(exc).__name__, exc)
            self._penalty = None
            return self._forward_chunk(rows, trees, kv, last_use, groups, out, stats)

    def _forward_chunk(self, rows: list[_Row], trees, kv, last_use, groups, out, stats: EngineStats) -> None:
        import torch
        dev = self.loaded.device
        if self._penalty is not None:      # widest first: width groups are contiguous ranges of rows
            rows = sorted(rows, key=lambda r: -(r.past + r.n))
        b, n, p = len(rows), max(r.n for r in rows), max(r.past for r in rows)
        ids = torch.full((b, n), self._pad_id, dtype=torch.long)
        pos = torch.tensor([[r.past] for r in rows]) + torch.arange(n)      # [b, n]; padding keeps counting
        for i, r in enumerate(rows):
            for x, o in zip(r.nodes, r.offs):
                node = trees[r.g][x]
                ids[i, o: o + len(node.tokens)] = torch.tensor(node.tokens)
                pos[i, o: o + len(node.tokens)] = torch.arange(node.past, node.past + len(node.tokens))
        cache, new_at, big = self._gather_past(rows, kv, p, n)
        ids, pos = ids.to(dev), pos.to(dev)
        # Unpacked roots need no mask: right padding is invisible to real tokens under causal
        # attention, and without a mask SDPA takes its causal fast path.
        mask_free = p == 0 and all(len(r.nodes) == 1 for r in rows)
        if mask_free:
            slices = [(0, n)]
            hidden = self._call(ids, pos, None, cache)
            scores = forward_scores(b, n, p, mask_free)
        else:
            # Masked attention is dense: slicing the queries skips most of the hidden upper
            # triangle (a slice never looks at keys after its own last query). Where rows' keys
            # sit at their own columns (in-place cache), each slice attends in width groups.
            slices, parts, scores = query_slices(n), [], 0
            # (the stock cache puts every row's new tokens at p: one width)
            penalty = self._penalty if big is not None else None
            for q0, q1 in slices:
                split = width_groups.plan_slice([r.past for r in rows], [r.n for r in rows], q0, q1, penalty)
                parts.append(self._call(ids[:, q0: q1], pos[:, q0: q1], self._mask(rows, new_at, p, q0, q1, pos),
                                        cache, split))
                scores += width_groups.slice_scores(split, b, p + q1, q0, q1)
            hidden = torch.cat(parts, dim=1)
        self._keep_kv(rows, cache, big, new_at, kv, last_use)
        self._read(rows, trees, hidden, groups, out)   # hidden: [b, n, H]
        stats.tokens_prefilled += sum(r.n for r in rows)
        stats.tokens_computed += b * n
        stats.scores_computed += scores
        stats.forwards += len(slices)
        stats.kv_bytes_peak = max(stats.kv_bytes_peak, self._held(kv) + b * (p + n) * self.loaded.kv_bytes_per_token)

    def _call(self, ids, pos, mask, cache, groups=None):
        """One model call on new tokens [b, q] after the cache's past -> final hidden states [b, q, H]."""
        return self.loaded.hidden(ids, pos, mask, cache, groups=groups)

    def _mask(self, rows: list[_Row], new_at: list[int], p: int, q0: int, q1: int, pos):
        """Additive mask [b, 1, q1 - q0, p + q1] for queries q0..q1: 0 where visible, dtype min elsewhere
        (per layer type on a model with sliding-window layers: masks.layer_masks).

        Row i's past fills the columns just before new_at[i]; its new token j sits at column
        new_at[i] + j. New key j is visible to query i iff j <= i and i lies inside the subtree of
        j's node, which depth-first packing makes contiguous. Padding queries see the real past
        and padding keys up to themselves (never an empty row). Per-row vectors are built on the
        host; the [b, q, p + q1] mask itself on pos's device (no large host-to-device copy).
        pos: [b, n] positions of every new token (padding keeps counting).
        """
        import torch
        b, dtype, dev = len(rows), self.loaded.dtype, pos.device
        end = torch.full((b, q1), 1 << 30, dtype=torch.long)   # [b, q1]: subtree end of each key's node
        for i, r in enumerate(rows):
            for o, m, e in zip(r.offs, r.lens, r.ends):
                end[i, o: min(o + m, q1)] = e
        end = end.to(dev)
        key, query = torch.arange(q1, device=dev), torch.arange(q0, q1, device=dev)
        hide_new = (key[None, None, :] > query[None, :, None]) | (query[None, :, None] >= end[:, None, :])  # [b, q, q1]
        at, past = torch.tensor(new_at, device=dev)[:, None], torch.tensor([r.past for r in rows], device=dev)[:, None]
        col = torch.arange(p + q1, device=dev)[None, :]
        hide = (col < at - past) | (col >= at)                                                                 # [b, p + q1]
        hide = hide[:, None, :].repeat(1, q1 - q0, 1)                                                          # [b, q, p + q1]
        hide.scatter_(2, (at + key[None, :])[:, None, :].expand(b, q1 - q0, q1), hide_new)
        windows, kpos = self.loaded.windows, None
        if windowed(windows):
            # key positions: past column c holds position c - (new_at - past); new token j, pos[:, j]
            j = (col - at).clamp(0, pos.shape[1] - 1).expand(b, -1)
            kpos = torch.where(col < at, col - (at - past), pos.gather(1, j))
        return layer_masks(hide, pos[:, q0: q1], kpos, windows, dtype)

    def _gather_past(self, rows: list[_Row], kv, p: int, room: int):
        """A cache holding each row's past KV [b, kvh, p, hd] per layer, new_at: the column of each
        row's first new token, and the all-layer (K, V) buffers [layers, b, kvh, p + room, hd] the
        in-place cache's layers view (None for the stock cache and for no past).

        The past is written straight into buffers with `room` free slots for the new tokens
        (past_cache.py); packed siblings share one row, so their past is written once. In-place,
        a row's past is left-aligned and its new tokens follow it (new_at = its past length), so
        its keys sit at the same columns in any batch; the stock cache appends every row's new
        tokens at p, so there the past is right-aligned (new_at = p).
        """
        import torch
        from transformers import DynamicCache

        from baer_fast.runtime.model.past_cache import inplace_cache
        if p == 0:
            return DynamicCache(), [0] * len(rows), None
        refs = kv[(rows[0].g, rows[0].chain[0])]                       # (K, V) [layers, kvh, n, hd]; MLA: K, V differ
        # One buffer per K and V for all layers: a row's past is written with one copy per
        # ancestor for every layer at once (a GPU launches 2 x rows x ancestors copies, not
        # that many per layer); each layer's cache buffer is a view of it.
        big = tuple(torch.empty((r.shape[0], len(rows), r.shape[1], p + room, r.shape[3]), dtype=r.dtype, device=r.device)
                    for r in refs)
        bufs = [(big[0][layer], big[1][layer]) for layer in range(self._layers)]
        pasts = [r.past for r in rows]
        cache = inplace_cache(bufs, p, pasts)
        new_at = pasts if cache is not None else [p] * len(rows)
        for i, r in enumerate(rows):
            at = new_at[i] - r.past
            # every column outside the row's past is zeroed, not left empty: a masked column still
            # enters attention as score + dtype-min and weight x value, so it must be finite. A
            # query slice sees columns that a later slice of a shorter-past row writes, and every
            # row sees the columns past its own room. The past's columns are written just below.
            for lo, hi in ((0, at), (new_at[i], p + room)):
                if lo < hi:
                    big[0][:, i, :, lo: hi].zero_()
                    big[1][:, i, :, lo: hi].zero_()
            for anc in r.chain:
                ka, va = kv[(r.g, anc)]
                big[0][:, i, :, at: at + ka.shape[2]] = ka
                big[1][:, i, :, at: at + ka.shape[2]] = va
                at += ka.shape[2]
        if cache is None:                       # stock cache: same values, one more copy
            cache = DynamicCache()
            for layer, (k, v) in enumerate(bufs):
                cache.update(k[:, :, :p].contiguous(), v[:, :, :p].contiguous(), layer)
            return cache, new_at, None
        return cache, new_at, big

    def _keep_kv(self, rows: list[_Row], cache, big, new_at: list[int], kv, last_use) -> None:
        """Store the own new KV of each packed node that later rows read as past (leaves never are),
        as (K, V) [layers, kvh, n, hd]: one copy per node from the all-layer buffers `big` when
        there are some, else stacked from the cache's layers."""
        import torch
        keep = [(i, x, o, m) for i, r in enumerate(rows) for x, o, m in zip(r.nodes, r.offs, r.lens)
                if (r.g, x) in last_use]
        if not keep:
            return
        layers = None if big is not None else [layer_kv(cache, layer) for layer in range(self._layers)]
        for i, x, o, m in keep:
            at = new_at[i] + o
            if big is not None:
                kv[(rows[i].g, x)] = (big[0][:, i, :, at: at + m].clone(), big[1][:, i, :, at: at + m].clone())
            else:
                kv[(rows[i].g, x)] = (torch.stack([k[i, :, at: at + m] for k, _ in layers]),
                                      torch.stack([v[i, :, at: at + m] for _, v in layers]))

    def _read(self, rows: list[_Row], trees, hidden, groups, out) -> None:
        want = [(i, o + m - 1, r.g, q) for i, r in enumerate(rows)
                for x, o, m in zip(r.nodes, r.offs, r.lens) for q in trees[r.g][x].ends
                if q < len(groups[r.g])]            # beyond: a handed-in prefix added to the tree
        if not want:
            return
        h = hidden[[i for i, _, _, _ in want], [c for _, c, _, _ in want]]            # [m, H]
        lps = read_rows(self.loaded, h, [groups[g][q].choices for _, _, g, q in want], kernels=self.config.kernels)
        for (_, _, g, q), lp in zip(want, lps):
            out[g][q] = lp


def _given(nodes: list[Node], n_real: int, given: list) -> dict:
    """{node: (K, V) of its own tokens} for the nodes handed-in prefix KV covers. The tree was
    built over n_real queries and then given's prefixes (sequence n_real + j is prefix j): each
    covers the nodes on its path, unless a real query ends on that path (its verdict needs the
    hidden state, which handed-in KV does not give): then those nodes are computed."""
    out = {}
    for j, (_, k, v) in enumerate(given):
        end = next(x for x, nd in enumerate(nodes) if n_real + j in nd.ends)
        path = ancestors(nodes, end) + [end]
        if any(q < n_real for x in path for q in nodes[x].ends):
            continue
        out.update((x, tuple(t[:, :, nodes[x].past: nodes[x].past + len(nodes[x].tokens)] for t in (k, v)))
                   for x in path)
    return out


def _paths(nodes: list[Node], first: int, prefixes: list) -> dict:
    """{prefix: the nodes on its path, root first}: prefix j joined the tree as sequence first + j."""
    out = {}
    for j, p in enumerate(prefixes):
        end = next(x for x, nd in enumerate(nodes) if first + j in nd.ends)
        out[p] = ancestors(nodes, end) + [end]
    return out


def _tokens(nodes: list[Node], packed: list[int]) -> int:
    return sum(len(nodes[i].tokens) for i in packed)


def _kept(rows: list[_Row]) -> set[int]:
    """Nodes of one group whose KV later rows read as past."""
    return {a for r in rows for a in r.chain}
