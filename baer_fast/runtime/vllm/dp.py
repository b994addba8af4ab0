"""Data parallelism for the vLLM backend: N engine replicas in N spawned processes, work sharded
by whole groups, results merged in input order. Knows nothing about prompts or labels.

vLLM's offline `LLM` refuses data_parallel_size > 1 in one process, so each rank is a spawned
process serving a one-replica `VllmEngine` over a pipe; `DataParallelEngine` has the Engine
interface. Groups (and generation rows) are split into contiguous shards of about equal tokens;
rows are seeded per request, so the merged output is one replica's. Each rank sees its own GPUs
(CUDA_VISIBLE_DEVICES) or its share of CPU cores (VLLM_CPU_OMP_THREADS_BIND). A rank that raises
or dies stops every rank with a BaerError naming it; `close()` (also at exit) shuts them down.
The design in full: docs/architecture.md.
"""
from __future__ import annotations

import atexit
import logging
import os
import time
import traceback
import weakref
from dataclasses import dataclass, replace

from baer_fast.errors import BaerError
from baer_fast.runtime.queries import EngineResult, EngineStats

log = logging.getLogger("baer_fast")

START_TIMEOUT_S = 1800       # a rank that has not started its engine by then is reported, not waited on
CLOSE_TIMEOUT_S = 60         # a rank that has not exited this long after "close" is terminated


def shard_bounds(costs: list[int], n: int) -> list[tuple[int, int]]:
    """Split items (in order) into n contiguous [lo, hi) shards of about equal total cost.
    Shards may be empty when there are fewer items than ranks."""
    total, bounds, lo, acc = sum(costs), [], 0, 0
    for r in range(1, n):
        target = total * r / n
        hi = lo
        while hi < len(costs) and acc + costs[hi] / 2 <= target:    # item goes where its middle falls
            acc += costs[hi]
            hi += 1
        bounds.append((lo, hi))
        lo = hi
    bounds.append((lo, len(costs)))
    return bounds


def device_slices(n: int, tp: int) -> list[str | None]:
    """CUDA_VISIBLE_DEVICES for each rank (tp devices each), or None per rank on a CPU machine."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        devices = [d for d in visible.split(",") if d.strip()]
    else:
        import torch
        devices = [str(i) for i in range(torch.cuda.device_count())]
    if not devices:
        return [None] * n
    if len(devices) < n * tp:
        raise BaerError(f"--data-parallel-size {n} x --tensor-parallel-size {tp} needs {n * tp} GPUs; "
                        f"{len(devices)} visible ({','.join(devices)})")
    return [",".join(devices[r * tp:(r + 1) * tp]) for r in range(n)]


def cpu_binds(n: int) -> list[str]:
    """VLLM_CPU_OMP_THREADS_BIND for each rank: its own contiguous share of this process's cores
    ("nobind" for all when there are fewer cores than ranks)."""
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    if len(cores) < n:
        return ["nobind"] * n
    return [",".join(str(c) for c in cores[lo:hi]) for lo, hi in shard_bounds([1] * len(cores), n)]


def rank_env(n: int, tp: int) -> list[dict]:
    """Environment variables each rank sets before importing torch/vLLM."""
    gpus = device_slices(n, tp)
    if gpus[0] is not None:
        return [{"CUDA_VISIBLE_DEVICES": g} for g in gpus]
    if "VLLM_CPU_OMP_THREADS_BIND" in os.environ:
        return [{} for _ in range(n)]
    return [{"VLLM_CPU_OMP_THREADS_BIND": b} for b in cpu_binds(n)]


def open_replica(path: str, options):
    """A rank's engine (the default factory; runs inside the rank's process)."""
    from baer_fast.runtime.vllm.backend import VllmEngine
    return VllmEngine.from_path(path, options)


def _serve(rank: int, conn, factory, path: str, options, env: dict) -> None:
    """A rank's process: start the engine, answer calls until "close" or the parent goes away."""
    import signal
    os.environ.update(env)
    signal.signal(signal.SIGINT, signal.SIG_IGN)             # the parent decides when ranks stop
    signal.signal(signal.SIGTERM, _exit_on_sigterm)          # so `finally` closes the engine
    engine = None
    try:
        try:
            engine = factory(path, options)
            conn.send(("ok", {"context_len": engine.loaded.context_len}))
        except Exception as e:
            conn.send(("err", _failure(e)))
            return
        while True:
            try:
                msg = conn.recv()
            except EOFError:                                   # the parent is gone
                return
            if msg[0] == "close":
                return
            try:
                conn.send(("ok", _call(engine, *msg)))
            except Exception as e:
                conn.send(("err", _failure(e)))
    finally:
        if engine is not None:
            engine.close()


def _failure(e: Exception) -> tuple[str, str]:
    """(one line for the parent's error: a BaerError's message, else `Type: first line`; the full
    traceback, which the parent logs at debug level)."""
    from baer_fast.runtime.vllm.backend import cause_line
    return str(e) if isinstance(e, BaerError) and "\n" not in str(e) else cause_line(e), traceback.format_exc()


def _exit_on_sigterm(signum, frame):
    raise SystemExit(128 + signum)


def _call(engine, method: str, *args):
    if method == "run":
        return engine.run(*args)
    if method == "generate":
        prompts, sampling, seeds = args
        return engine.generate(prompts, sampling, seeds=seeds)
    if method == "decode":
        return engine.make_decoder().generate(*args)
    raise ValueError(f"unknown call {method!r}")


@dataclass
class _Rank:
    rank: int
    process: object               # multiprocessing Process
    conn: object                  # the parent's end of the pipe
    busy: bool = True             # a call (or the engine start) is in flight: close terminates it


class DataParallelEngine:
    """N vLLM replicas (one process each) behind the engine interface; see the module docstring."""

    kind = "vllm"                     # capabilities: see interfaces.Engine
    takes_prefix_kv = False
    shares_prefixes = True

    def __init__(self, path: str, options, *, factory=open_replica):
        import multiprocessing as mp

        from baer_fast.runtime.model.load import check_model_dir
        from baer_fast.runtime.vllm.backend import VllmModel, eos_ids, require_vllm
        check_model_dir(path)
        if factory is open_replica:
            require_vllm()                                     # say how to install it before spawning
        from transformers import AutoTokenizer
        tok = AutoTokenizer.from_pretrained(path, local_files_only=True, trust_remote_code=options.trust_remote_code)
        n = options.data_parallel_size
        envs = rank_env(n, options.tensor_parallel_size)
        one = replace(options, data_parallel_size=1)
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(options.cpu_kv_cache_gb))   # inherited by ranks
        self._ranks, self.closed = [], False
        self._finalizer = weakref.finalize(self, _shutdown, self._ranks)
        atexit.register(self._finalizer)     # before multiprocessing's exit hook joins the (waiting) ranks
        t0 = time.perf_counter()
        ctx = mp.get_context("spawn")        # CUDA (and vLLM's own processes) do not survive fork
        for rank in range(n):
            self._ranks.append(_start_rank(ctx, rank, (factory, path, one, envs[rank])))
        ready = self._gather(list(range(n)), timeout=START_TIMEOUT_S, what="start its engine")
        log.info("vLLM data parallel: %d replicas started in %.1fs (%s)", n, time.perf_counter() - t0,
                 "; ".join(f"rank {r}: {e}" for r, e in enumerate(envs)))
        self.loaded = VllmModel(None, tok, path, ready[0]["context_len"], options,
                                eos_ids(path, tok, options.trust_remote_code))

    # ------------------------------------------------------------------ engine interface
    def plan_tokens(self, groups) -> list[int]:
        """Upper bound without running: every prompt's tokens (as VllmEngine.plan_tokens)."""
        return [sum(len(q.ids) for q in group) for group in groups]

    def run(self, groups) -> EngineResult:
        t0 = time.perf_counter()
        shards = self._scatter("run", groups, self.plan_tokens(groups))
        out, per_group, stats = [], [], EngineStats()
        for res in shards:
            if res is not None:
                out += res.logprobs
                per_group += res.tokens_per_group
                stats.add(res.stats)
        stats.seconds = time.perf_counter() - t0                 # wall time, not the ranks' sum
        return EngineResult(out, per_group, stats)

    def generate(self, prompts_ids, sampling, *, seeds=None, seed: int | None = None) -> list[list[int]]:
        from baer_fast.runtime.seeds import row_seeds
        prompts_ids = [tuple(p) for p in prompts_ids]
        seeds = row_seeds(prompts_ids, seeds=seeds, seed=seed)
        costs = [len(p) + sampling.max_tokens for p in prompts_ids]
        bounds = shard_bounds(costs, len(self._ranks))
        args = [(prompts_ids[lo:hi], sampling, seeds[lo:hi]) for lo, hi in bounds]
        return [t for res in self._call_ranks("generate", args, bounds) for t in (res or [])]

    def make_decoder(self, config=None) -> "_ShardedDecoder":
        return _ShardedDecoder(self)

    def close(self) -> None:
        """Close every rank's engine and end its process (idempotent)."""
        self.closed = True
        self._finalizer()

    # ------------------------------------------------------------------ plumbing
    def _scatter(self, method: str, items: list, costs: list[int]) -> list:
        bounds = shard_bounds(costs, len(self._ranks))
        return self._call_ranks(method, [(items[lo:hi],) for lo, hi in bounds], bounds)

    def _call_ranks(self, method: str, args: list[tuple], bounds) -> list:
        """Send each non-empty shard to its rank, then collect every answer (None for empty shards)."""
        if self.closed:
            raise BaerError("this vLLM data-parallel engine is closed")
        busy = [r for r, (lo, hi) in enumerate(bounds) if hi > lo]
        try:
            for r in busy:
                self._send(self._ranks[r], (method, *args[r]), method)
            got = self._gather(busy, timeout=None, what=method)
        except BaseException:                       # a rank's error, a dead rank, KeyboardInterrupt
            self.close()
            raise
        return [got.get(r) for r in range(len(self._ranks))]

    @staticmethod
    def _send(w: _Rank, msg: tuple, what: str) -> None:
        try:
            w.conn.send(msg)
        except OSError:                             # its end of the pipe is gone: the process died
            w.process.join(5)
            raise _died(w, what) from None
        w.busy = True

    def _gather(self, ranks: list[int], *, timeout, what: str) -> dict:
        """rank -> answer; polls each rank's pipe and process so a dead rank is an error, not a hang."""
        out, deadline = {}, None if timeout is None else time.monotonic() + timeout
        try:
            for r in ranks:
                out[r] = self._answer(self._ranks[r], deadline, what)
        except BaseException:
            self.close()
            raise
        return out

    def _answer(self, w: _Rank, deadline, what: str):
        while not w.conn.poll(1.0):
            if not w.process.is_alive():
                raise _died(w, what)
            if deadline is not None and time.monotonic() > deadline:
                raise BaerError(f"vLLM data-parallel rank {w.rank} did not {what} within the time limit")
        try:
            status, payload = w.conn.recv()
        except EOFError:                            # its end of the pipe closed: the process is exiting
            w.process.join(5)
            raise _died(w, what) from None
        w.busy = False
        if status == "err":
            line, trace = payload
            log.debug("vLLM data-parallel rank %d failed to %s:\n%s", w.rank, what, trace.rstrip())
            raise BaerError(f"vLLM data-parallel rank {w.rank} failed to {what}: {line}")
        return payload


def _start_rank(ctx, rank: int, serve_args: tuple) -> _Rank:
    """Spawn one rank's process: `_serve(rank, <its end of a pipe>, *serve_args)`."""
    mine, theirs = ctx.Pipe()
    p = ctx.Process(target=_serve, args=(rank, theirs, *serve_args), name=f"baer-vllm-dp{rank}")
    p.start()
    theirs.close()
    return _Rank(rank, p, mine)


def _died(w: _Rank, what: str) -> BaerError:
    return BaerError(f"vLLM data-parallel rank {w.rank} died (exit code {w.process.exitcode}) while asked to "
                     f"{what}; see its log above")


class _ShardedDecoder:
    """decode.Decoder's contract over the ranks: requests split contiguously by cost, results in order."""

    reads_prompts = False             # capabilities: see interfaces.Decoder
    exports_prefixes = False
    stats = None

    def __init__(self, engine: DataParallelEngine):
        self.engine = engine

    def generate(self, requests: list) -> list:
        costs = [len(r.prompt) + r.samples * r.max_new_tokens for r in requests]
        return [g for res in self.engine._scatter("decode", requests, costs) for g in (res or [])]


def _shutdown(ranks: list[_Rank]) -> None:
    """Ask every idle rank to close and terminate busy ones (SIGTERM: the rank closes its engine
    on the way out), wait, then kill whatever is left."""
    for w in ranks:
        try:
            if w.busy:
                w.process.terminate()
            else:
                w.conn.send(("close",))
        except (OSError, ValueError):
            pass
    deadline = time.monotonic() + CLOSE_TIMEOUT_S
    for w in ranks:
        w.process.join(max(0.0, deadline - time.monotonic()))
        if w.process.is_alive():
            log.warning("vLLM data-parallel rank %d did not exit after close; terminating it", w.rank)
            w.process.terminate()
            w.process.join(10)
        if w.process.is_alive():
            w.process.kill()
            w.process.join(10)
        w.conn.close()
    ranks.clear()
