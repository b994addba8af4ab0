"""Decode steps with static shapes: blocks of k steps per host read, stop rules checked after them.

Knows nothing about prompts or experts; drives a decode.Decoder's rows, slots and forward. A
step's inputs live in buffers allocated once per generate (`StepBuffers`, [slots, ...] on the
model's device): last token ids, positions (= lengths - 1, as a tensor), the block's tokens and
uniforms, the sampler's settings. A step over n rows uses the buffers' first `bucket(n)` rows.
A block runs k = min(check_every, the least budget left) steps with no host read between them:
each step's tokens are written to the block and fed to the next step on the device. Then one copy
brings the block to the host, where each row takes its tokens one at a time through the stop
rules (stops.py), exactly as a per-step loop would, and a row finished mid-block drops the rest:
its overshoot, whose KV lies past the row's end and is never read. On CUDA the step (forward, LM
head, argmax) may be replayed from a CUDA graph per bucket (decode_graphs.py); on CPU it runs
eagerly, in width groups, with the bucket the row count itself (padding rows would cost FLOPs).
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from baer_fast.runtime.plan import width_groups
from baer_fast.runtime.sampling import pick_tokens


@dataclass
class StepBuffers:
    """The decode step's inputs and outputs, allocated once per generate ([slots, ...], device)."""
    ids: object          # [S, 1] int64: each row's last token (the step's input)
    pos: object          # [S, 1] int64: its position = column (its length - 1)
    toks: object         # [S, k] int64: the block's chosen tokens
    u: object            # [S, k] float64: the block's uniforms (sampled rows)
    temp: object         # [S] fp32: temperature (0: greedy)
    top_p: object        # [S] fp32
    wide: object         # [S] bool: the sampler's memory of rows that needed a full sort

    @classmethod
    def allocate(cls, slots: int, k: int, device) -> "StepBuffers":
        import torch
        z = dict(device=device)
        return cls(torch.zeros((slots, 1), dtype=torch.long, **z), torch.zeros((slots, 1), dtype=torch.long, **z),
                   torch.zeros((slots, k), dtype=torch.long, **z), torch.zeros((slots, k), dtype=torch.float64, **z),
                   torch.zeros(slots, **z), torch.ones(slots, **z), torch.zeros(slots, dtype=torch.bool, **z))


def buckets(slots: int) -> list[int]:
    """The row counts a captured step is built for: powers of two below `slots`, then `slots`."""
    out, b = [], 1
    while b < slots:
        out.append(b)
        b *= 2
    return out + [slots]


def bucket(n: int, slots: int, padded: bool) -> int:
    """Rows a step over n active rows computes: n itself, or (padded) the least bucket >= n."""
    return next(b for b in buckets(slots) if b >= n) if padded else n


class Blocks:
    """Runs a Decoder's decode steps in blocks (see the module docstring). graphs: a
    decode_graphs.Graphs replaying the captured step, or None (eager)."""

    def __init__(self, dec, slots: int, k: int, graphs=None):
        self.dec, self.slots, self.k, self.graphs = dec, slots, max(1, k), graphs
        self.buf = StepBuffers.allocate(slots, self.k, dec.loaded.device)
        self._layout = None            # the decoder's slot layout the buffers hold
        self._spans: list = []         # CUDA events around this block's forwards
        self._cuda = dec.loaded.device.type == "cuda"

    def run(self) -> None:
        """One block of steps over the decoder's active rows; then their tokens, stops and retirements."""
        dec = self.dec
        t0 = time.perf_counter()
        groups = None if (dec._kernel or self.graphs) else dec._groups()     # may reorder the slots first
        rows = list(dec._rows)
        n, lens = len(rows), dec._lens()
        k = min(self.k, min(r.budget - len(r.out) for r in rows))
        b = bucket(n, self.slots, self.graphs is not None)
        if self._layout != dec._layout:
            self._load(rows, lens, b)
        sampled = any(not r.greedy for r in rows)
        if sampled:
            self._uniforms(rows, k)
        fwd = 0.0
        for j in range(k):
            fwd += self._step(j, b, n, groups, lens, sampled)
            if dec._penalty is None:       # the forward refused width groups: one width from now on
                groups = None
        t_host = time.perf_counter()
        toks = self.buf.toks[:n, :k].tolist()                 # the block's one host read
        wide = self.buf.wide[:n].tolist() if sampled else None
        self._finish(rows, toks, wide)
        t1 = time.perf_counter()
        if self._spans:                # CUDA: the forwards' device time (the host only queued them)
            fwd = sum(a.elapsed_time(z) for a, z in self._spans) / 1e3
            self._spans = []
        dec.stats.step_seconds += t1 - t0
        dec.stats.step_forward_seconds += fwd
        dec.stats.blocks += 1
        dec.stats.block_host_seconds += t1 - t_host
        for r in rows:
            dec._results[r.req].seconds += (t1 - t0) / n

    def _load(self, rows, lens: list[int], b: int) -> None:
        """The rows' state into the buffers' first rows (after any admission, retirement or move);
        rows n..b-1 (a bucket's padding) decode the pad token at column 0 of a free slot, greedily."""
        import torch
        buf, pad, n = self.buf, self.dec._pad, len(rows)
        dev = buf.ids.device
        buf.ids[:b, 0] = torch.tensor([r.out[-1] for r in rows] + [pad] * (b - n), device=dev)
        buf.pos[:b, 0] = torch.tensor(lens + [0] * (b - n), device=dev)
        buf.temp[:b] = torch.tensor([0.0 if r.greedy else r.temperature for r in rows] + [0.0] * (b - n), device=dev)
        buf.top_p[:b] = torch.tensor([r.top_p for r in rows] + [1.0] * (b - n), device=dev)
        buf.wide[:b] = torch.tensor([r.wide for r in rows] + [False] * (b - n), device=dev)
        self._layout = self.dec._layout

    def _uniforms(self, rows, k: int) -> None:
        """Each sampled row's next k uniforms (its token index on), greedy rows 0."""
        import torch
        u = [r.u[len(r.out): len(r.out) + k] if not r.greedy else [0.0] * k for r in rows]
        self.buf.u[: len(rows), :k] = torch.tensor(u, dtype=torch.float64, device=self.buf.u.device)

    def _step(self, j: int, b: int, n: int, groups, lens: list[int], sampled: bool) -> float:
        """Step j of the block: forward, LM head, token choice, inputs advanced on the device
        -> host seconds of forward and LM head (on CUDA, run() takes their device time from events)."""
        dec, buf = self.dec, self.buf
        ids, pos = buf.ids[:b], buf.pos[:b]
        t0 = time.perf_counter()
        span = self._event() if self._cuda else None
        if self.graphs is not None:
            logits, greedy = self.graphs.step(b)
            t_fwd = time.perf_counter()
            dec.stats.scores_decoded += n * (max(lens) + j + 1)
        else:
            grown = None if groups is None else [(lo, hi, w + j) for lo, hi, w in groups]
            if dec._kernel:
                hidden = dec._forward(0, ids, pos, kernel=True)
            else:
                hidden, grown = dec._forward_in_groups(0, ids, pos, grown)
            logits = dec._logits(hidden[:, -1])
            greedy, t_fwd = None, time.perf_counter()
            dec.stats.scores_decoded += width_groups.cost(grown) if grown else n * (max(lens) + j + 1)
        if span is not None:
            span[1].record()
            self._spans.append(span)
        if sampled:
            tok = pick_tokens(logits, buf.temp[:b], buf.top_p[:b], buf.u[:b, j], buf.wide[:b])
        else:
            tok = greedy if greedy is not None else logits.argmax(-1)
        buf.toks[:b, j] = tok
        ids[:, 0] = tok
        pos += 1
        dec.stats.steps += 1
        dec.stats.rows_peak = max(dec.stats.rows_peak, n)
        dec.stats.scores_decoded_own += sum(lens) + n * (j + 1)
        return t_fwd - t0

    @staticmethod
    def _event():
        import torch
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        return start, end

    def _finish(self, rows, toks: list[list[int]], wide) -> None:
        """Each row takes the block's tokens one at a time until a stop rule ends it (the rest is
        overshoot, dropped); finished rows are recorded and retired."""
        dec, done = self.dec, []
        for s, (r, ts) in enumerate(zip(rows, toks)):
            for j, t in enumerate(ts):
                r.out.append(t)
                r.finish = dec._finished(r)
                if r.finish:
                    dec.stats.tokens_overshoot += len(ts) - 1 - j
                    break
            if wide is not None:
                r.wide = bool(wide[s])
            if r.finish:
                dec._record(r)
                done.append(s)
        if done:
            dec._retire(done)
