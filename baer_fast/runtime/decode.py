"""Batched decoding with shared prompt KV and continuous batching: token ids in, token ids out.

Knows nothing about prompts, labels or experts. The prompts entering together form one radix
tree over token ids (prefix_tree.py), each node prefilled once over its parent's KV; each
prompt's KV is then copied to one slot per sample. Every row's KV lives in its slot of the
slot buffers (slots.py, sized once within the memory budget), contiguous from column 0; a
decode step feeds each active row its last token at its own position and attends, in width
groups (width_groups.py), under a mask hiding columns past the row's length. Active rows sit
in slots [0, n): a finished row's slot is refilled by the last row (one batched copy), waiting
requests enter as soon as slots are free for all their samples. Tokens are chosen by
sampling.py (greedy argmax, or each row's own seeded inverse CDF); stop rules are stops.py.
Prompt reads (GenRequest.reads_prompt) ride in the tree and are read at the prefill's last
hidden state. Steps run in blocks with static shapes (decode_step.py): the host reads the
chosen ids once per block to test EOS, stops and budgets; CUDA graphs per bucket where probed.
"""
from __future__ import annotations

import logging
import time
from collections import deque
from dataclasses import dataclass, field

from baer_fast.runtime import decode_graphs, decode_kernel
from baer_fast.runtime.config import DECODER
from baer_fast.runtime.decode_io import DecodeStats, GenRequest, GenResult  # noqa: F401 (re-exported)
from baer_fast.runtime.decode_step import Blocks
from baer_fast.runtime.model.flops import flop_model
from baer_fast.runtime.model.masks import layer_masks
from baer_fast.runtime.model.readout import model_logits, read_rows
from baer_fast.runtime.plan import width_groups
from baer_fast.runtime.plan.chunks import QUERY_SLICE, flop_chunks
from baer_fast.runtime.plan.prefix_tree import build_tree
from baer_fast.runtime.sampling import pick_rows
from baer_fast.runtime.slots import SlotBuffers, activation_bytes, plan_slots
from baer_fast.runtime.stops import eos_token_ids, finish_reason, trim_generation

log = logging.getLogger("baer_fast")

GATHER_COLUMNS = 4           # a prefill forward attends over at most this many x prefill_tokens columns in all


@dataclass
class _Row:
    req: int
    budget: int
    greedy: bool
    temperature: float
    top_p: float
    u: list | None                    # per-token uniforms (sampled rows)
    stop: tuple[str, ...]
    out: list[int] = field(default_factory=list)
    sample: int = 0
    finish: str = ""
    wide: bool = False                # its last top-p nucleus needed a full sort (try that first)


class Decoder:
    """Decoder(loaded).generate(requests) -> one GenResult per request, in order.

    Decode steps, prefill slices and verdict reads attend in width groups (width_groups.py)
    unless split_attention is False or the model's masked attention is not SDPA; group_columns:
    what one more group costs, in row columns attended by one query (default: the device's
    width_groups.GROUP_SCORES; 0 splits wherever a column is saved)."""

    reads_prompts = True          # takes GenRequest.reads_prompt requests (run_generative asks)
    exports_prefixes = True       # generate(export=...) hands out prompt-prefix KV (run_generative asks)

    def __init__(self, loaded, *, max_rows: int = DECODER.max_rows, memory_budget_bytes: int = DECODER.memory_budget_bytes,
                 prefill_tokens: int = DECODER.prefill_tokens, eos_ids=None, group_columns: int | None = DECODER.group_columns,
                 split_attention: bool = DECODER.split_attention, kernels: str = "auto", kernel_probe: bool = True,
                 check_every: int | None = DECODER.check_every, graphs: str = DECODER.graphs, graph_probe: bool = True,
                 graph_capture=None):
        self.loaded, self._kernels = loaded, kernels
        self.max_rows, self.prefill_tokens, self.memory_budget_bytes = max_rows, prefill_tokens, memory_budget_bytes
        self.eos = frozenset(eos_ids) if eos_ids is not None else eos_token_ids(loaded)
        self._layers = loaded.model.config.get_text_config().num_hidden_layers
        self._kv_shape = loaded.kv_shape()          # ((K heads, K dim), (V heads, V dim)): MLA caches differ
        self._pad = int(getattr(loaded.tokenizer, "pad_token_id", None) or 0)
        self._fm = flop_model(loaded)
        # a further width group's cost in scores, a decode step's row columns (None: one width)
        self._penalty = width_groups.group_cost(loaded, split_attention, group_columns)
        self.stats = DecodeStats()
        # decode steps through the decode-attention kernel (CUDA, Triton): only once its probe passed on this device
        self._kernel = decode_kernel.usable(loaded, kernels) and (not kernel_probe or decode_kernel.probe(loaded, kernels))
        # steps per host read of the chosen ids (DecoderConfig.check_every); captured steps only once probed
        self.check_every = check_every or (DECODER.check_every_cuda if loaded.device.type == "cuda" else 1)
        self._capture, probed = graph_capture, kernels if self._kernel else "torch"
        self.graphs = decode_graphs.usable(loaded, graphs, graph_capture) and \
            (not graph_probe or decode_graphs.probe(Decoder, loaded, probed, graph_capture))

    @property
    def splits_attention(self) -> bool:
        """Whether forwards attend in width groups (False: one width, every row over the widest;
        the model's masked attention is not SDPA, or its forward refused the groups)."""
        return self._penalty is not None

    def generate(self, requests: list[GenRequest], *, export=None, export_bytes: int = 0) -> list[GenResult]:
        """export: {request index: token prefixes of its prompt} whose KV to keep, up to
        export_bytes in all: copied out of the request's slot right after its prefill into
        `self.exported` {prefix: (K, V) [layers, kvh, len, hd]} (the engine takes it, so verdict
        prompts that embed generated text after that prefix need not prefill it again)."""
        import torch
        t0 = time.perf_counter()
        self._requests = requests
        self.exported, self._export, self._export_left = {}, dict(export or {}), export_bytes
        self._results = [GenResult([()] * r.samples, [""] * r.samples,
                                   verdicts=[None] * r.samples if r.choices else None) for r in requests]
        self._rows: list[_Row] = []
        self._layout, self._plan = 0, None    # slot arrangement version; the width groups planned for it
        wanted = sum(len(p) for ps in (export or {}).values() for p in set(ps)) * self.loaded.kv_bytes_per_token
        self._slots = self._allocate(requests, min(export_bytes, wanted))   # the exports' own KV, not their cap
        pending = deque(range(len(requests)))
        blocks = Blocks(self, self._slots, self.check_every, None)
        if self.graphs:
            blocks.graphs = decode_graphs.Graphs(self, blocks.buf, self._capture)
        with torch.inference_mode():
            while pending or self._rows:
                self._admit(pending)
                if self._rows:
                    blocks.run()
        self._buf = None
        self.stats.seconds += time.perf_counter() - t0
        return self._results

    def _allocate(self, requests: list[GenRequest], exported: int) -> int:
        """The slot buffers for these requests, once: every slot as wide as the widest row, as
        many slots as the budget holds after one forward's activations and the exported KV -> slots."""
        need = max((len(r.prompt) + r.max_new_tokens + len(r.cue) + 1 for r in requests), default=1)
        rows = min(self.max_rows, sum(r.samples for r in requests))
        reserve = exported + activation_bytes(self.loaded, tokens=self.prefill_tokens, rows=rows,
                                              columns=min(need, GATHER_COLUMNS * self.prefill_tokens))
        plan = plan_slots(budget=self.memory_budget_bytes, need_columns=need, rows_wanted=rows,
                          rows_min=max((r.samples for r in requests), default=1),
                          kv_bytes_per_token=self.loaded.kv_bytes_per_token, reserve=reserve)
        self._buf = SlotBuffers(self.loaded, plan, self._layers)
        self.stats.kv_bytes_peak = max(self.stats.kv_bytes_peak, self._buf.bytes)
        self.stats.reserve_bytes = max(self.stats.reserve_bytes, reserve)
        return plan.slots

    def _lens(self) -> list[int]:
        return [len(self._requests[r.req].prompt) + len(r.out) - 1 for r in self._rows]

    # ------------------------------------------------------------------ admission + prefill
    def _admit(self, pending) -> None:
        """Prefill the waiting requests that fit the free slots; again while prompt reads, done at
        prefill, left slots free (a step then runs as many rows as fit)."""
        while True:
            free, batch = self._slots - len(self._rows), []
            while pending and self._requests[pending[0]].samples <= free:
                i = pending.popleft()
                free -= self._requests[i].samples
                batch.append(i)
            if not batch:
                return
            self._prefill(batch)
            if not any(self._requests[i].reads_prompt for i in batch):
                return

    def _prefill(self, batch: list[int]) -> None:
        """Prefill the entering prompts as one radix tree, then expand each to its samples.

        Every tree node (a token run shared by the prompts below it: the template and system
        prompt of every pair, a pair's question, an order's [A][B], an instruction) is computed
        once, level by level, in the slot of the first prompt below it, over its parent's KV
        (copied there first from the parent's slot when that is another one). Prompts take slots
        in depth-first order, so a prompt ending at a node finds the whole path's KV in its slot;
        an identical prompt gets a copy. Every further sample's slot receives a copy of the
        finished prompt KV; all samples draw their first token from the prompt's last-position
        logits.
        """
        import torch
        t0 = time.perf_counter()
        prompts = [self._requests[i].prompt for i in batch]
        nodes = build_tree(prompts)
        base, order, home = len(self._rows), [], []
        for nd in nodes:                        # preorder: a node's subtree holds consecutive prompts
            home.append(base + len(order))
            order.extend(nd.ends)
        first_slot = {j: base + k for k, j in enumerate(order)}
        last = {}
        for depth in sorted({nd.depth for nd in nodes}):
            level = [x for x, nd in enumerate(nodes) if nd.depth == depth]
            moved = [x for x in level if nodes[x].parent >= 0 and home[x] != home[nodes[x].parent]]
            self._buf.copy([home[nodes[x].parent] for x in moved], [home[x] for x in moved],
                             max((nodes[x].past for x in moved), default=0))
            # rows x new tokens bounded by prefill_tokens, rows x columns attended (the KV a
            # forward over scattered slots gathers per layer) by GATHER_COLUMNS x prefill_tokens,
            # and padding by FLOPs (engine.flop_chunks)
            for part in flop_chunks(level, lambda x: len(nodes[x].tokens), lambda x: nodes[x].past, self._fm,
                                    lambda b, n, p: b * n <= self.prefill_tokens and
                                    b * (p + n) <= GATHER_COLUMNS * self.prefill_tokens):
                hidden = self._prefill_nodes([nodes[x] for x in part], [home[x] for x in part])
                for k, x in enumerate(part):
                    for j in nodes[x].ends:
                        last[j] = hidden[k, len(nodes[x].tokens) - 1]
            twins = [(home[x], first_slot[j]) for x in level for j in nodes[x].ends[1:]]
            self._buf.copy([a for a, _ in twins], [b for _, b in twins],
                             max((len(prompts[j]) for x in level for j in nodes[x].ends[1:]), default=0))
        if self._export:
            self._export_prefixes(batch, first_slot)
        extra = [(j, s) for j in order for s in range(1, self._requests[batch[j]].samples)]
        self._buf.copy([first_slot[j] for j, _ in extra], list(range(base + len(order), base + len(order) + len(extra))),
                         max((len(prompts[j]) for j, _ in extra), default=0))
        rows = [(first_slot[j], j, 0) for j in order] + \
            [(base + len(order) + e, j, s) for e, (j, s) in enumerate(extra)]       # (slot, prompt, sample)
        reads = {j for j in order if self._requests[batch[j]].reads_prompt}
        if reads:
            self._read_prompts([batch[j] for j in sorted(reads)], [last[j] for j in sorted(reads)])
            rows = self._drop_slots(rows, reads, prompts)
        if rows:
            new_rows = [self._row(batch[j], s) for _, j, s in rows]
            logits = self._logits(torch.stack([last[j] for _, j, _ in rows]))
            self._rows.extend(new_rows)
            self._layout += 1
            self._advance(new_rows, logits, first=base)
        dt, total = time.perf_counter() - t0, sum(len(p) for p in prompts)
        for i, p in zip(batch, prompts):
            self._results[i].seconds += dt * len(p) / total

    def _export_prefixes(self, batch: list[int], first_slot: dict) -> None:
        """Copy out the KV of the prefixes wanted from this batch's prompts (a prompt's slot holds
        its whole KV now), while the export budget lasts."""
        for j, i in enumerate(batch):
            for prefix in self._export.pop(i, ()):
                n = len(prefix)
                if prefix in self.exported or n * self.loaded.kv_bytes_per_token > self._export_left:
                    continue
                if self._requests[i].prompt[:n] != prefix:
                    raise ValueError(f"request {i}: an exported prefix must be a prefix of its prompt")
                self._export_left -= n * self.loaded.kv_bytes_per_token
                slot = first_slot[j]
                self.exported[prefix] = self._buf.prefix(slot, n)

    def _read_prompts(self, reqs: list[int], hidden: list) -> None:
        """Prompt reads (GenRequest.reads_prompt): log-softmax over each one's choices at its prompt's
        last position, from the prefill's final hidden states (the engine's constrained readout)."""
        import torch
        lps = read_rows(self.loaded, torch.stack(hidden), [self._requests[i].choices for i in reqs])
        for i, lp in zip(reqs, lps):
            res = self._results[i]
            res.tokens, res.finish, res.verdicts = [()], ["read"], [lp]

    def _drop_slots(self, rows: list[tuple], gone: set, prompts) -> list[tuple]:
        """rows: (slot, prompt, sample) in slot order from the first new slot on. Drop every row of
        a prompt in `gone`: the kept rows beyond the new end move into the freed slots below it
        (one copy each) -> the kept rows, in slot order."""
        keep = [r for r in rows if r[1] not in gone]
        if not keep:
            return []
        cut = rows[0][0] + len(keep)
        holes = [slot for slot, j, _ in rows if j in gone and slot < cut]
        movers = [r for r in keep if r[0] >= cut]
        self._buf.copy([slot for slot, _, _ in movers], holes, max((len(prompts[j]) for _, j, _ in movers), default=0))
        moved = {r: hole for r, hole in zip(movers, holes)}
        return sorted(((moved.get(r, r[0]), r[1], r[2]) for r in keep))

    def _prefill_nodes(self, nodes, slots: list[int]):
        """Tree nodes (their parents' KV already in `slots`) -> hidden [k, longest, H]: right
        padded, fed in query slices of at most QUERY_SLICE tokens so the masked (dense)
        attention never scores keys after a slice's last query."""
        import torch
        dev = self.loaded.device
        q = max(len(nd.tokens) for nd in nodes)
        ids = torch.full((len(nodes), q), self._pad, dtype=torch.long)
        for k, nd in enumerate(nodes):
            ids[k, : len(nd.tokens)] = torch.tensor(nd.tokens)
        pos = torch.tensor([nd.past for nd in nodes])[:, None] + torch.arange(q)         # [k, q]
        ids, pos = ids.to(dev), pos.to(dev)
        if slots == list(range(slots[0], slots[0] + len(slots))):
            slots = slots[0]                     # a contiguous run: slot views, no gather
        parts, p = [], max(nd.past for nd in nodes)
        pasts, news = [nd.past for nd in nodes], [len(nd.tokens) for nd in nodes]
        for q0 in range(0, q, QUERY_SLICE):
            q1 = min(q0 + QUERY_SLICE, q)
            groups = width_groups.plan_slice(pasts, news, q0, q1, self._penalty)
            hidden, used = self._forward_in_groups(slots, ids[:, q0: q1], pos[:, q0: q1], groups)
            parts.append(hidden)
            self.stats.scores_prefilled += width_groups.slice_scores(used, len(nodes), p + q1, q0, q1)
        self.stats.prefills += len(parts)
        self.stats.tokens_prefilled += sum(len(nd.tokens) for nd in nodes)
        return torch.cat(parts, dim=1)

    def _forward(self, slots, ids, pos, groups=None, kernel: bool = False):
        """Slots [slots, slots + k) (or the k slots listed) take tokens ids [k, q] at positions
        pos [k, q] (= their columns), each attending to its own columns <= that position
        -> hidden [k, q, H]. groups: width groups of the k rows (width_groups.plan), if any."""
        import torch
        # a padding query past the slots' last column (a short row padded to a long one) writes and
        # reads that column: it holds no row's KV when padding is fed (rows' own columns end before it)
        pos = pos.clamp(max=self._buf.columns - 1)
        width = int(pos.max()) + 1
        cols = torch.arange(width, device=ids.device)
        # mask: [k, 1, q, width] additive; column c (= position c) is visible to query (b, i) iff
        # c <= pos[b, i] (and, on sliding-window layers, pos[b, i] - c < window)
        hide = cols[None, None, :] > pos[:, :, None]
        mask = layer_masks(hide, pos, cols[None, :].expand(ids.shape[0], -1), self.loaded.windows, self.loaded.dtype)
        cache = self._buf.cache(slots, pos, width)
        if kernel:
            return decode_kernel.forward(self.loaded, ids, pos, mask, cache, self._kernels)
        return self.loaded.hidden(ids, pos, mask, cache, groups=groups)

    def _row(self, i: int, s: int) -> _Row:
        import torch
        req = self._requests[i]
        greedy = req.temperature <= 0
        u = None
        if not greedy:
            g = torch.Generator().manual_seed(int(req.seeds[s]) & ((1 << 63) - 1))
            u = torch.rand(req.max_new_tokens, generator=g, dtype=torch.float64).tolist()
        return _Row(i, req.max_new_tokens, greedy, req.temperature, req.top_p, u, req.stop, sample=s)

    # ------------------------------------------------------------------ decode (steps: decode_step.py)
    def _forward_in_groups(self, slots, ids, pos, groups):
        """_forward over `slots` in width groups (None or one group: one width)
        -> (hidden, the groups it ran in, or None).

        A forward that cannot take the width-group attention (remote code picking its own
        attention classes by name) runs again in one width (rewriting the same KV columns), and
        so does every later one of this decoder."""
        if not groups or len(groups) == 1:
            return self._forward(slots, ids, pos), None
        try:
            return self._forward(slots, ids, pos, groups), groups
        except Exception as exc:
            log.warning("decode steps in one width for %s: its forward failed with width groups (%s: %s)",
                        self.loaded.name, type(exc).__name__, exc)
            self._penalty = None
            return self._forward(slots, ids, pos), None

    def _groups(self):
        """This step's width groups (None where the model's masked attention cannot split).

        Planned once per slot arrangement: until a row enters, leaves or moves, every row grows
        by one column per step, so the same ranges stay best and only their widths move on.
        Slots are first sorted by length where that pays (_maybe_sort)."""
        if self._penalty is None:
            return None
        widths = [n + 1 for n in self._lens()]
        if self._plan is None or self._plan[0] != self._layout:
            self._maybe_sort(widths)
            widths = [n + 1 for n in self._lens()]
            self._plan = (self._layout, widths[0], width_groups.plan(widths, self._penalty))
        _, first, groups = self._plan
        grown = widths[0] - first
        return [(lo, hi, w + grown) for lo, hi, w in groups]

    def _maybe_sort(self, widths: list[int]) -> None:
        """Reorder the slots longest first when the attention it saves over the steps likely left
        outweighs the copy (every active row's columns, read and written once).

        Steps left: half the median budget the rows have left (rows often stop early)."""
        order = sorted(range(len(widths)), key=lambda k: -widths[k])
        if order == list(range(len(widths))):
            return
        best = width_groups.best_cost
        left = sorted(r.budget - len(r.out) for r in self._rows)[len(self._rows) // 2] / 2
        gain = (best(widths, self._penalty) - best([widths[k] for k in order], self._penalty)) * left
        if gain > 2 * len(widths) * max(widths):
            self._permute(order)

    def _permute(self, order: list[int]) -> None:
        """Slot k takes the row now in slot order[k] (its KV and its _Row)."""
        self._buf.permute(order, max(self._lens()))      # the columns holding KV (the next token's is unwritten)
        self._rows = [self._rows[k] for k in order]
        self._layout += 1
        self.stats.sorts += 1

    def _logits(self, hidden):
        """hidden [m, H] -> full-vocabulary logits [m, V] fp32 (last positions only)."""
        return model_logits(self.loaded, hidden)

    def _advance(self, rows: list[_Row], logits, *, first: int) -> None:
        """Append each row's first token (rows occupy slots first..first+len(rows)); retire finished rows."""
        done = []
        for k, (r, t) in enumerate(zip(rows, pick_rows(logits, rows))):
            r.out.append(t)
            r.finish = self._finished(r)
            if r.finish:
                self._record(r)
                done.append(first + k)
        if done:
            self._retire(done)

    def _record(self, r: _Row) -> None:
        res = self._results[r.req]
        res.tokens[r.sample], res.finish[r.sample] = tuple(r.out), r.finish
        self.stats.tokens_decoded += len(r.out)

    def _finished(self, r: _Row) -> str:
        return finish_reason(self.loaded.tokenizer, r.out, eos=self.eos, stop=r.stop, budget=r.budget)

    def _retire(self, done: list[int]) -> None:
        """Free the slots `done`: the verdicts asked of finished rows are read in one forward over
        their slots, then the rows kept past the new end move into the freed slots below it (one
        batched copy; a finished row's KV is never moved)."""
        reading = [d for d in done if self._requests[self._rows[d].req].choices]
        if reading:
            t0 = time.perf_counter()
            self._read_verdicts(reading)
            self.stats.cue_seconds += time.perf_counter() - t0
        n, k, gone = len(self._rows), len(done), set(done)
        holes = sorted(d for d in done if d < n - k)
        movers = [t for t in range(n - k, n) if t not in gone]
        if movers:
            lens = self._lens()
            self._buf.copy(movers, holes, max(lens[t] for t in movers))   # written columns (the next is not)
            for h, t in zip(holes, movers):
                self._rows[h] = self._rows[t]
        del self._rows[n - k:]
        self._layout += 1

    def _read_verdicts(self, slots: list[int]) -> None:
        """The rows in `slots` are finished and ask for a verdict: feed each its kept generation's
        missing KV plus the cue, and read the constrained verdict at the last cue position."""
        import torch
        tok, dev = self.loaded.tokenizer, self.loaded.device
        feeds, starts, rows = [], [], [self._rows[s] for s in slots]
        for r in rows:
            req = self._requests[r.req]
            kept = trim_generation(tok, tuple(r.out), r.finish, req.stop)
            k0 = min(len(kept), len(r.out) - 1)          # generated tokens whose KV is in the cache
            feeds.append(list(kept[k0:]) + list(req.cue))
            starts.append(len(req.prompt) + k0)
        q = max(len(f) for f in feeds)
        ids = torch.full((len(feeds), q), self._pad, dtype=torch.long)
        for j, f in enumerate(feeds):
            ids[j, : len(f)] = torch.tensor(f)
        pos = torch.tensor(starts)[:, None] + torch.arange(q)
        groups = width_groups.plan_slice(starts, [q] * len(starts), 0, q, self._penalty)   # q queries a row
        run = slots[0] if slots == list(range(slots[0], slots[0] + len(slots))) else slots
        hidden, _ = self._forward_in_groups(run, ids.to(dev), pos.to(dev), groups)         # [k, q, H]
        h = hidden[list(range(len(rows))), [len(f) - 1 for f in feeds]]                    # [k, H]
        for r, f, lp in zip(rows, feeds, read_rows(self.loaded, h, [self._requests[r.req].choices for r in rows])):
            self._results[r.req].verdicts[r.sample] = lp
            self.stats.tokens_cue += len(f)

