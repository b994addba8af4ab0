"""Batched decoding with shared prompt KV and continuous batching: token ids in, token ids out.

Knows nothing about prompts, labels or experts. A request is one prompt (token ids) with a
token budget, stop conditions and a sample count; its prompt is prefilled once and its KV
copied to one cache row per sample ("expand to the sample count"), so samples share the
prompt's computation and only their own tokens are decoded separately. Prompts entering
together also share prefixes: they form one radix tree over token ids (prefix_tree.py), and
each node (the template and system prompt, a pair's question, an order's [A][B], an
instruction) is prefilled once, level by level, over its parent's KV in the slot of the first
prompt below it.

Layout (per-row cache positions, per-row masked batch). Every layer owns one buffer
K, V: [slots, kvh, columns, hd]. A row's KV lives in its slot, contiguous from column 0:
column j holds position j, and the row's own length `lens[b]` says where its next token is
written. One decode step feeds each active row its last token at position `lens[b]`, writes
the new K/V at column `lens[b]` of its slot (scatter, in place), and attends with a 4-D
additive mask that hides every column past the row's own length. Rows of any length therefore
share one forward with no left padding to recompute and no right padding to decode. In one
width, a row would also score the masked columns up to the widest row's length (1.9x the rows'
own scores on real lengths); instead the step's rows attend in width groups (width_groups.py):
contiguous slot ranges, each over its own widest row, inside the same forward. Slots are
sorted by length when the attention that saves outweighs the copy.
Active rows are kept in slots [0, n): a finished row leaves at once and the last active row
is moved into its slot (one copy of that row's KV); waiting requests are prefilled and enter
at the end as soon as enough slots are free for all their samples (continuous batching).

Sampling: every (request, sample) has its own seed; its uniforms u_0, u_1, ... are drawn
up front from a torch.Generator seeded with it, and token k is the inverse CDF of that row's
temperature/top-p distribution at u_k, walked in token-id order (near ties whose probability
order rounding flips then leave the pick alone). A row's tokens therefore depend only on its own
logits and its own seed, never on which other rows share the batch (up to float rounding of
the logits themselves). Greedy rows take the argmax. Only the last position's hidden state
is projected to full-vocabulary logits.

Prompt reads: a request with no tokens to generate (GenRequest.reads_prompt) enters the prompt
tree like any other; its constrained verdict is read from the prefill's last hidden state and its
slot is freed at once. The single-pass bank's prompts ride along with the generations this way,
so their shared `[system][question][A][B]` is prefilled once for both.

Host synchronisation: each step copies the chosen token ids to the host (one small transfer)
to test EOS, stop strings and budgets; stop strings are matched on the decoded tail only.
"""
from __future__ import annotations

import logging
import time
from collections import deque
from dataclasses import dataclass, field

from baer_fast.runtime.config import DECODER
from baer_fast.runtime.plan import width_groups
from baer_fast.runtime.plan.chunks import QUERY_SLICE, flop_chunks
from baer_fast.runtime.model.masks import layer_masks
from baer_fast.runtime.model.flops import flop_model
from baer_fast.runtime.plan.prefix_tree import build_tree
from baer_fast.runtime.model.readout import model_logits, read_rows

log = logging.getLogger("baer_fast")

INITIAL_COLUMNS_MAX = 2048   # slot-buffer columns allocated up front at most; beyond, grown by doubling
GATHER_COLUMNS = 4           # a prefill forward attends over at most this many x prefill_tokens columns in all
NUCLEUS_TOP_K = 1024         # top-p candidates taken by top-k first; a row whose top-k mass < top_p sorts all


@dataclass(frozen=True)
class GenRequest:
    prompt: tuple[int, ...]           # token ids of the full rendered prompt
    max_new_tokens: int               # budget for each sample
    samples: int = 1                  # rows decoded from this prompt's one prefill
    temperature: float = 0.0          # 0 = greedy
    top_p: float = 1.0
    seeds: tuple[int, ...] = ()       # one per sample when sampling (ignored when greedy)
    stop: tuple[str, ...] = ()        # stop strings, matched on the decoded generation
    cue: tuple[int, ...] = ()         # with choices: fed after the kept generation (EOS/stop trimmed)...
    choices: tuple[int, ...] = ()     # ...then log-softmax over these ids is read (GenResult.verdicts)

    def __post_init__(self):
        if self.max_new_tokens < 0 or self.samples < 1 or not self.prompt:
            raise ValueError("a generation request needs a prompt, max_new_tokens >= 0 and samples >= 1")
        if self.reads_prompt:
            if not self.choices or self.cue or self.samples != 1:
                raise ValueError("a prompt read (max_new_tokens 0) needs choices, no cue and one sample")
        elif self.choices and not self.cue:
            raise ValueError("a verdict read after the generation needs a non-empty cue")
        if self.temperature > 0 and len(self.seeds) != self.samples:
            raise ValueError("a sampled request needs one seed per sample")

    @property
    def reads_prompt(self) -> bool:
        """Nothing generated: the verdict over `choices` is read at the prompt's last position by
        the prefill that computes it, whose prompt tree the generations entering with it share."""
        return self.max_new_tokens == 0


@dataclass
class GenResult:
    tokens: list[tuple[int, ...]]     # per sample: generated ids (the stop/EOS token included)
    finish: list[str]                 # per sample: "eos" | "stop" | "length" | "read" (a prompt read)
    seconds: float = 0.0              # this request's share of prefill and decode time
    verdicts: list | None = None      # per sample: log-probs over `choices` after the cue (if asked)


@dataclass
class DecodeStats:
    tokens_prefilled: int = 0
    scores_prefilled: int = 0         # attention scores the prefill forwards computed (queries.py)
    tokens_decoded: int = 0           # generated tokens, every sample counted
    scores_decoded: int = 0           # attention scores the decode steps computed: every row over its group's widest
    scores_decoded_own: int = 0       # ...of which each row's own context (the rest is masked padding)
    sorts: int = 0                    # slot reorders by length (each copies every active row's KV once)
    steps: int = 0                    # batched decode forwards
    prefills: int = 0                 # prefill forwards
    rows_peak: int = 0
    kv_bytes_peak: int = 0            # slot buffers allocated (K and V, every layer) at most
    tokens_cue: int = 0               # tokens fed after generations to read verdicts
    seconds: float = 0.0


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


class _SlotCache:
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


class Decoder:
    """Decoder(loaded).generate(requests) -> one GenResult per request, in order.

    Decode steps, prefill slices and verdict reads attend in width groups (width_groups.py)
    unless split_attention is False or the model's masked attention is not SDPA; group_columns:
    what one more group costs, in row columns attended by one query (default: the device's
    width_groups.GROUP_SCORES; 0 splits wherever a column is saved)."""

    reads_prompts = True          # takes GenRequest.reads_prompt requests (run_generative asks)
    exports_prefixes = True       # generate(export=...) hands out prompt-prefix KV (run_generative asks)

    def __init__(self, loaded, *, max_rows: int = DECODER.max_rows,
                 memory_budget_bytes: int = DECODER.memory_budget_bytes,
                 prefill_tokens: int = DECODER.prefill_tokens, eos_ids=None,
                 group_columns: int | None = DECODER.group_columns,
                 split_attention: bool = DECODER.split_attention):
        self.loaded = loaded
        self.max_rows, self.prefill_tokens, self.memory_budget_bytes = max_rows, prefill_tokens, memory_budget_bytes
        self.eos = frozenset(eos_ids) if eos_ids is not None else eos_token_ids(loaded)
        self._layers = loaded.model.config.get_text_config().num_hidden_layers
        self._kv_shape = loaded.kv_shape()          # ((K heads, K dim), (V heads, V dim)): MLA caches differ
        self._pad = int(getattr(loaded.tokenizer, "pad_token_id", None) or 0)
        self._fm = flop_model(loaded)
        # a further width group's cost in scores, a decode step's row columns (None: one width)
        self._penalty = width_groups.group_cost(loaded, split_attention, group_columns)
        self.stats = DecodeStats()

    # ------------------------------------------------------------------ public
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
        self._bufs = None
        self._layout, self._plan = 0, None    # slot arrangement version; the width groups planned for it
        # first allocation: every row's full length if that is modest (no regrowth copies), else grow
        self._cols_hint = min(max((len(r.prompt) + r.max_new_tokens + len(r.cue) + 1 for r in requests), default=1),
                              INITIAL_COLUMNS_MAX)
        # rows in flight: as many as the KV budget holds at that width (never fewer than one request's samples)
        by_memory = self.memory_budget_bytes // max(1, self._cols_hint * self.loaded.kv_bytes_per_token)
        self._slots = max(min(self.max_rows, by_memory, sum(r.samples for r in requests)),
                          max((r.samples for r in requests), default=1))
        pending = deque(range(len(requests)))
        with torch.inference_mode():
            while pending or self._rows:
                self._admit(pending)
                if self._rows:
                    self._step()
        self._bufs = None
        self.stats.seconds += time.perf_counter() - t0
        return self._results

    # ------------------------------------------------------------------ buffers
    def _ensure(self, width: int) -> None:
        """Slot buffers with at least `width` columns (grown by doubling, rows' KV kept)."""
        import torch
        have = 0 if self._bufs is None else self._bufs[0][0].shape[2]
        if width <= have:
            return
        cols = max(width, 2 * have, self._cols_hint)
        dev, dt = self.loaded.device, self.loaded.dtype
        new = []
        for layer in range(self._layers):
            k, v = (torch.empty((self._slots, heads, cols, dim), dtype=dt, device=dev) for heads, dim in self._kv_shape)
            for buf, old in ((k, 0), (v, 1)):
                buf[:, :, have:].zero_()        # masked columns must be finite (additive mask)
                if have:
                    buf[:, :, :have] = self._bufs[layer][old]
            new.append((k, v))
        self._bufs = new
        held = sum(t.numel() * t.element_size() for kv in new for t in kv)
        self.stats.kv_bytes_peak = max(self.stats.kv_bytes_peak, held)

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
        self._ensure(max(len(p) for p in prompts) + 1)
        last = {}
        for depth in sorted({nd.depth for nd in nodes}):
            level = [x for x, nd in enumerate(nodes) if nd.depth == depth]
            moved = [x for x in level if nodes[x].parent >= 0 and home[x] != home[nodes[x].parent]]
            self._copy_slots([home[nodes[x].parent] for x in moved], [home[x] for x in moved],
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
            self._copy_slots([a for a, _ in twins], [b for _, b in twins],
                             max((len(prompts[j]) for x in level for j in nodes[x].ends[1:]), default=0))
        if self._export:
            self._export_prefixes(batch, first_slot)
        extra = [(j, s) for j in order for s in range(1, self._requests[batch[j]].samples)]
        self._copy_slots([first_slot[j] for j, _ in extra], list(range(base + len(order), base + len(order) + len(extra))),
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
        import torch
        for j, i in enumerate(batch):
            for prefix in self._export.pop(i, ()):
                n = len(prefix)
                if prefix in self.exported or n * self.loaded.kv_bytes_per_token > self._export_left:
                    continue
                if self._requests[i].prompt[:n] != prefix:
                    raise ValueError(f"request {i}: an exported prefix must be a prefix of its prompt")
                self._export_left -= n * self.loaded.kv_bytes_per_token
                slot = first_slot[j]
                self.exported[prefix] = tuple(torch.stack([kv[t][slot, :, :n] for kv in self._bufs])
                                              for t in (0, 1))

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
        self._copy_slots([slot for slot, _, _ in movers], holes, max((len(prompts[j]) for _, j, _ in movers), default=0))
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

    def _copy_slots(self, src: list[int], dst: list[int], n: int) -> None:
        """Columns [:n] of slots src -> slots dst, one gather and scatter per buffer. Columns past a
        destination's own need arrive too; they are overwritten before any query can see them."""
        import torch
        if not src:
            return
        s = torch.tensor(src, device=self.loaded.device)
        d = torch.tensor(dst, device=self.loaded.device)
        for k, v in self._bufs:
            for buf in (k, v):
                buf[d, :, :n] = buf[s, :, :n]

    def _forward(self, slots, ids, pos, groups=None):
        """Slots [slots, slots + k) (or the k slots listed) take tokens ids [k, q] at positions
        pos [k, q] (= their columns), each attending to its own columns <= that position
        -> hidden [k, q, H]. groups: width groups of the k rows (width_groups.plan), if any."""
        import torch
        width = int(pos.max()) + 1
        self._ensure(width)
        cols = torch.arange(width, device=ids.device)
        # mask: [k, 1, q, width] additive; column c (= position c) is visible to query (b, i) iff
        # c <= pos[b, i] (and, on sliding-window layers, pos[b, i] - c < window)
        hide = cols[None, None, :] > pos[:, :, None]
        mask = layer_masks(hide, pos, cols[None, :].expand(ids.shape[0], -1), self.loaded.windows, self.loaded.dtype)
        cache = _SlotCache(self._bufs, slots, pos, width)
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

    # ------------------------------------------------------------------ decode
    def _step(self) -> None:
        import torch
        t0 = time.perf_counter()
        groups = self._groups()
        n, dev, lens = len(self._rows), self.loaded.device, self._lens()
        pos = torch.tensor(lens, device=dev)[:, None]                          # [n, 1]
        ids = torch.tensor([r.out[-1] for r in self._rows], device=dev)[:, None]
        hidden, groups = self._forward_in_groups(0, ids, pos, groups)
        logits = self._logits(hidden[:, -1])
        self.stats.steps += 1
        self.stats.rows_peak = max(self.stats.rows_peak, n)
        self.stats.scores_decoded += width_groups.cost(groups) if groups else n * (max(lens) + 1)
        self.stats.scores_decoded_own += sum(lens) + n
        rows = list(self._rows)
        self._advance(rows, logits, first=0)
        dt = (time.perf_counter() - t0) / n
        for r in rows:
            self._results[r.req].seconds += dt

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
        import torch
        n, cols = len(order), max(self._lens())          # the columns holding KV (the next token's is unwritten)
        idx = torch.tensor(order, device=self.loaded.device)
        for k, v in self._bufs:
            for buf in (k, v):
                buf[:n, :, :cols] = buf[idx, :, :cols]
        self._rows = [self._rows[k] for k in order]
        self._layout += 1
        self.stats.sorts += 1

    def _logits(self, hidden):
        """hidden [m, H] -> full-vocabulary logits [m, V] fp32 (last positions only)."""
        return model_logits(self.loaded, hidden)

    def _advance(self, rows: list[_Row], logits, *, first: int) -> None:
        """Append each row's next token (rows occupy slots first..first+len(rows)); retire finished rows."""
        toks = pick_tokens(logits, rows)
        done = []
        for k, (r, t) in enumerate(zip(rows, toks)):
            r.out.append(t)
            r.finish = self._finished(r)
            if r.finish:
                res = self._results[r.req]
                res.tokens[r.sample], res.finish[r.sample] = tuple(r.out), r.finish
                self.stats.tokens_decoded += len(r.out)
                done.append(first + k)
        if done:
            self._retire(done)

    def _finished(self, r: _Row) -> str:
        if r.out[-1] in self.eos:
            return "eos"
        if r.stop and hits_stop(self.loaded.tokenizer, r.out, r.stop):
            return "stop"
        return "length" if len(r.out) >= r.budget else ""

    def _retire(self, done: list[int]) -> None:
        """Free the slots `done`: finished rows are swapped into the tail [n - k, n) (one KV swap
        per row not already there), verdicts are read there in one forward, then the tail goes."""
        n, k = len(self._rows), len(done)
        gone = set(done)
        keep_in_tail = [t for t in range(n - k, n) if t not in gone]
        for d, t in zip(sorted(s for s in done if s < n - k), keep_in_tail):
            self._swap(d, t)
        if any(self._requests[self._rows[s].req].choices for s in range(n - k, n)):
            self._read_verdicts(n - k)
        del self._rows[n - k:]
        self._layout += 1

    def _swap(self, a: int, b: int) -> None:
        n = max(len(self._requests[self._rows[s].req].prompt) + len(self._rows[s].out) for s in (a, b))
        for k, v in self._bufs:
            for buf in (k, v):
                tmp = buf[a, :, :n].clone()
                buf[a, :, :n] = buf[b, :, :n]
                buf[b, :, :n] = tmp
        self._rows[a], self._rows[b] = self._rows[b], self._rows[a]

    def _read_verdicts(self, first: int) -> None:
        """Rows [first, n) are finished: feed each its kept generation's missing KV plus the cue,
        and read the constrained verdict at the last cue position (rows without a cue feed a pad)."""
        import torch
        tok, dev = self.loaded.tokenizer, self.loaded.device
        feeds, starts = [], []
        for r in self._rows[first:]:
            req = self._requests[r.req]
            kept = trim_generation(tok, tuple(r.out), r.finish, req.stop)
            k0 = min(len(kept), len(r.out) - 1)          # generated tokens whose KV is in the cache
            feeds.append(list(kept[k0:]) + list(req.cue) if req.choices else [self._pad])
            starts.append(len(req.prompt) + k0)
        q = max(len(f) for f in feeds)
        ids = torch.full((len(feeds), q), self._pad, dtype=torch.long)
        for j, f in enumerate(feeds):
            ids[j, : len(f)] = torch.tensor(f)
        pos = torch.tensor(starts)[:, None] + torch.arange(q)
        groups = width_groups.plan_slice(starts, [q] * len(starts), 0, q, self._penalty)   # q queries a row
        hidden, _ = self._forward_in_groups(first, ids.to(dev), pos.to(dev), groups)       # [k, q, H]
        reading = [(j, r) for j, r in enumerate(self._rows[first:]) if self._requests[r.req].choices]
        if reading:
            h = hidden[[j for j, _ in reading], [len(feeds[j]) - 1 for j, _ in reading]]      # [m, H]
            for (j, r), lp in zip(reading, read_rows(self.loaded, h, [self._requests[r.req].choices
                                                                      for _, r in reading])):
                self._results[r.req].verdicts[r.sample] = lp
                self.stats.tokens_cue += len(feeds[j])


def pick_tokens(logits, rows: list[_Row]) -> list[int]:
    """logits [m, V] fp32 -> one token per row: argmax for greedy rows, else the inverse CDF of
    the row's temperature/top-p distribution at its own next uniform."""
    import torch
    out = logits.argmax(-1)
    sampled = [k for k, r in enumerate(rows) if not r.greedy]
    if not sampled:
        return out.tolist()
    dev = logits.device
    idx = torch.tensor(sampled, device=dev)
    temp = torch.tensor([rows[k].temperature for k in sampled], device=dev)
    top_p = torch.tensor([rows[k].top_p for k in sampled], device=dev)
    u = torch.tensor([rows[k].u[len(rows[k].out)] for k in sampled], device=dev, dtype=torch.float64)
    probs = torch.softmax(logits[idx] / temp[:, None], dim=-1)                       # [s, V]
    # The nucleus lies inside the top K exactly when the top K hold >= top_p of the mass: those
    # rows need only a top-k (the usual case for a trained model); the others sort everything.
    # A row whose last step needed the full sort goes straight to it (same pick either way).
    wide_before = [k for k, j in enumerate(sampled) if rows[j].wide]
    narrow = [k for k, j in enumerate(sampled) if not rows[j].wide]
    picked = torch.empty(len(sampled), dtype=torch.long, device=dev)
    wide = torch.tensor(wide_before, dtype=torch.long, device=dev)
    if narrow:
        nar = torch.tensor(narrow, device=dev)
        p_top, order = probs[nar].topk(min(NUCLEUS_TOP_K, probs.shape[-1]), dim=-1)
        picked[nar] = _nucleus_pick(p_top, order, top_p[nar], u[nar], full=order.shape[-1] == probs.shape[-1])
        missed = nar[p_top.sum(-1) < top_p[nar]]
        for k in missed.tolist():
            rows[sampled[k]].wide = True
        wide = torch.cat([wide, missed])
    if len(wide):
        p_all, order_all = probs[wide].sort(dim=-1, descending=True)
        picked[wide] = _nucleus_pick(p_all, order_all, top_p[wide], u[wide], full=True)
    out[idx] = picked
    return out.tolist()


def _nucleus_pick(p_sorted, order, top_p, u, full: bool = False):
    """p_sorted [s, K] descending with token ids `order` (full: every id of the vocabulary): keep
    the smallest prefix holding top_p (the top token always stays), pick the token at the
    inverse CDF of u -> ids [s].

    The CDF is walked in token-id order, not probability order. Both sample the same
    distribution, but two nearly tied tokens swap places in probability order whenever rounding
    differs (another batch composition, another device), and that moves every u between them to
    the other token. In id order a swap only moves a boundary by their tiny difference.
    """
    import torch
    before = p_sorted.cumsum(-1) - p_sorted
    kept = p_sorted.masked_fill(before >= top_p[:, None], 0.0).double()
    if full:   # a permutation of the whole vocabulary: its inverse, not a second sort
        ids = torch.arange(order.shape[-1], device=order.device).expand_as(order)
        by_id = torch.empty_like(order).scatter_(1, order, ids)
    else:
        ids, by_id = order.sort(dim=-1)
    cdf = kept.gather(1, by_id).cumsum(-1)
    # searchsorted(right=True) skips zero-width (dropped) tokens; should u * total round up to the
    # total, the last kept token (the first position whose cdf reaches it) is taken
    j = torch.searchsorted(cdf, (u * cdf[:, -1])[:, None], right=True)
    j = torch.minimum(j, (cdf < cdf[:, -1:]).sum(-1, keepdim=True))
    return ids.gather(1, j)[:, 0]


def trim_generation(tok, ids: tuple[int, ...], finish: str, stop) -> tuple[int, ...]:
    """The kept generation: EOS dropped, or the tokens that completed a stop string dropped
    (until it no longer appears in the decoded text)."""
    if finish == "eos":
        return ids[:-1]
    if finish == "stop":
        while ids and any(s in tok.decode(ids, skip_special_tokens=False) for s in stop):
            ids = ids[:-1]
    return ids


def hits_stop(tok, out: list[int], stop: tuple[str, ...]) -> bool:
    """Did the last token complete a stop string? Only the decoded tail is examined."""
    longest = max(len(s) for s in stop)
    tail = tok.decode(out[-(longest + 8):], skip_special_tokens=False)
    prev = tok.decode(out[-(longest + 8):-1], skip_special_tokens=False) if len(out) > 1 else ""
    return any(s in tail and s not in prev for s in stop)


def eos_token_ids(loaded) -> frozenset:
    """EOS ids as `generate` would use them: the generation config's, else the model config's,
    else the tokenizer's."""
    gen = getattr(loaded.model, "generation_config", None)
    eos = getattr(gen, "eos_token_id", None) if gen is not None else None
    return eos_set(eos if eos is not None else getattr(loaded.model.config, "eos_token_id", None), loaded.tokenizer)


def eos_set(eos, tokenizer) -> frozenset:
    """The configs' eos_token_id (an id, a list of ids, or None) as a set, falling back to the
    tokenizer's EOS; the one rule of the hf decoder and the vLLM backend's (vllm_backend.eos_ids)."""
    ids = set([eos] if isinstance(eos, int) else (eos or ()))
    if not ids and getattr(tokenizer, "eos_token_id", None) is not None:
        ids.add(tokenizer.eos_token_id)
    return frozenset(ids)
