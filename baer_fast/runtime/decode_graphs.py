"""The decode step as CUDA graphs, one per slot-count bucket, behind a load-time probe.

Knows nothing about requests or sampling. `Graphs.step(b)` replays the step over the first b
rows of decode_step.StepBuffers: the model's forward (ids, pos -> KV written at pos, attention
over the slots' full width, each row under its mask or, through the decode-attention kernel,
over its own length), the LM head and the argmax, into static outputs. A bucket's graph is
captured the first time it runs (after two warm-up runs on a side stream; a step rewrites the
same KV columns with the same values, so the warm-ups change nothing). Nothing in the step
reads the host: the width is the buffers', the lengths are `pos + 1`. The decoder uses graphs
only where `usable` (CUDA) and `probe` on that device gave the eager step's tokens (greedy and
sampled rows, several buckets); otherwise eager steps, with one log line.
"""
from __future__ import annotations

import logging

log = logging.getLogger("baer_fast")

PROBE_LENGTHS, PROBE_TOKENS = (40, 13, 27), 9    # the probe's prompts and tokens compared


def forward_static(dec, ids, pos):
    """The decoder's forward over slots [0, b) at full width: ids, pos [b, 1] -> hidden [b, 1, H].
    No host read: the width is the buffers' columns, each row's mask hides columns past pos."""
    import torch

    from baer_fast.runtime import decode_kernel
    from baer_fast.runtime.model.masks import layer_masks
    width = dec._buf.columns
    cols = torch.arange(width, device=ids.device)
    hide = cols[None, None, :] > pos[:, :, None]                                     # [b, 1, width]
    mask = layer_masks(hide, pos, cols[None, :].expand(ids.shape[0], -1), dec.loaded.windows, dec.loaded.dtype)
    cache = dec._buf.cache(0, pos, width)
    if dec._kernel:
        return decode_kernel.forward(dec.loaded, ids, pos, mask, cache, dec._kernels)
    return dec.loaded.hidden(ids, pos, mask, cache)


class Graphs:
    """Captured decode steps over `buf` (decode_step.StepBuffers) for the decoder `dec`.
    capture: a function (fn) -> replay() (default: CUDA graphs; tests pass a stand-in)."""

    def __init__(self, dec, buf, capture=None):
        self.dec, self.buf, self._capture = dec, buf, capture or CudaCapture()
        self._steps: dict[int, tuple] = {}          # bucket -> (replay, its static outputs)

    def step(self, b: int):
        """Replay bucket b's step -> (logits [b, V] fp32, greedy ids [b]), static outputs."""
        if b not in self._steps:
            out = {}

            def body():
                hidden = forward_static(self.dec, self.buf.ids[:b], self.buf.pos[:b])
                out["logits"] = self.dec._logits(hidden[:, -1])
                out["greedy"] = out["logits"].argmax(-1)
            replay = self._capture(body)
            self._steps[b] = (replay, out)
        replay, out = self._steps[b]
        replay()
        return out["logits"], out["greedy"]


class CudaCapture:
    """Captures bodies as torch.cuda.CUDAGraph -> their replay(); the graphs of one instance (one
    generate's buckets) share one memory pool. The pool is this instance's own: a pool whose
    graphs have all been freed cannot take a new capture (the caching allocator asserts), so a
    process-wide handle breaks the first capture after a decoder is dropped (the probe's)."""

    def __init__(self):
        self.pool, self.graphs = None, []

    def __call__(self, body):
        import torch
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                body()
        torch.cuda.current_stream().wait_stream(side)
        if self.pool is None:
            self.pool = torch.cuda.graph_pool_handle()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self.pool):
            body()
        self.graphs.append(graph)          # alive while the pool is in use
        return graph.replay


def eagerly(body):
    """The reference "capture": no graph; every replay runs the step's body."""
    return body


def usable(loaded, graphs: str, capture=None) -> bool:
    """Whether captured steps may be tried (before the probe): "auto" on CUDA, or with a `capture`
    stand-in (tests on CPU)."""
    if graphs not in ("auto", "off"):
        raise ValueError(f"graphs must be auto or off, not {graphs!r}")
    return graphs == "auto" and (capture is not None or loaded.device.type == "cuda")


def probe(decoder_class, loaded, kernels: str, capture=None) -> bool:
    """The probe requests (greedy rows of three lengths, two sampled rows) through captured steps
    and through the same steps run eagerly (two fresh decoders; the second's "capture" runs the
    step's body at every replay: the same buckets, full width and kernels) give the same tokens;
    logs which path runs. It checks what capture can break (host reads, stale or aliased
    buffers), not the full-width step against the eager path's width groups: in bf16 those round
    differently and part at the first near-tie of the logits, as they did on an H200."""
    from baer_fast.runtime.decode_io import GenRequest
    vocab = loaded.model.get_input_embeddings().num_embeddings
    reqs = [GenRequest(tuple((7 * i + 3 * n) % vocab for i in range(n)), PROBE_TOKENS - 2 * k)     # rows leave:
            for k, n in enumerate(PROBE_LENGTHS)]                                               # buckets change
    reqs.append(GenRequest(reqs[0].prompt, PROBE_TOKENS, samples=2, temperature=0.8, top_p=0.9, seeds=(1, 2)))
    why = ""
    try:
        got = [decoder_class(loaded, kernels=kernels, graphs="auto", graph_probe=False, kernel_probe=False, eos_ids=(),
                             graph_capture=c, max_rows=8).generate(reqs) for c in (capture, eagerly)]
        ok = [r.tokens for r in got[0]] == [r.tokens for r in got[1]]
        why = "" if ok else "did not give"
    except Exception as exc:            # a forward that reads the host or allocates inside capture
        ok, why = False, f"failed ({type(exc).__name__}: {exc})"
    if ok:
        log.info("decoder: decode steps replayed from CUDA graphs (their probe gave the eager steps' tokens)")
    else:
        log.warning("decoder: eager decode steps; captured steps %s the eager steps' tokens in the probe",
                    why or "did not give")
    return ok
