"""Micro-batching: concurrent requests are queued and merged into one engine call.

A batch starts with the oldest waiting request and takes the next ones while they fit in
`max_batch_pairs` and the first has waited less than `max_wait_ms`; requests that queued while
the engine was busy join at once. Pairs of one batch go to `judge_fn` in one call, so pairs
that share a question share its prefix across requests. Each caller gets its own slice back,
in order. When a merged call fails, every request of it is rerun alone, so one request's
failure reaches only that request. A request cancelled before its batch runs (its client hung
up) leaves the queue at once, unjudged; one already in the engine runs to the end. `judge_fn`
runs on one worker thread (one engine call at a time); the event loop stays free.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Sequence

Pair = tuple                         # (question, response_a, response_b[, subset, category])


class QueueFull(Exception):
    """The queue holds max_queue requests: the caller should retry later (503)."""


@dataclass
class _Job:
    pairs: Sequence[Pair]
    future: asyncio.Future
    enqueued: float = field(default_factory=time.monotonic)


class MicroBatcher:
    def __init__(self, judge_fn: Callable[[list[Pair]], list], *, max_batch_pairs: int, max_wait_ms: float,
                 max_queue: int, metrics=None):
        self.judge_fn, self.metrics = judge_fn, metrics
        self.max_batch_pairs, self.max_wait = max_batch_pairs, max_wait_ms / 1000.0
        self.max_queue = max_queue
        self._waiting: deque[_Job] = deque()  # submitted, not yet taken into a batch
        self._arrived = asyncio.Event()       # set when a job is appended to _waiting
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="baer-engine")
        self._held: _Job | None = None        # took from the queue, did not fit the last batch
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> None:
        """Finish what is queued, then stop the worker (the server stopped taking requests first)."""
        while self._held is not None or self._waiting:
            await asyncio.sleep(0.01)
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self._pool.shutdown(wait=True)

    def depth(self) -> int:
        return len(self._waiting) + (self._held is not None)

    async def submit(self, pairs: Sequence[Pair]) -> list:
        """Results of `pairs`, in order; raises QueueFull, or what judging this request raised.
        Cancelling the caller cancels its job: a job still waiting is dropped, unjudged."""
        if not pairs:
            return []
        if len(self._waiting) >= self.max_queue:
            raise QueueFull()
        job = _Job(pairs, asyncio.get_running_loop().create_future())
        job.future.add_done_callback(lambda _f: self._forget(job))
        self._waiting.append(job)
        self._arrived.set()
        self._gauge()
        return await job.future

    def _forget(self, job: _Job) -> None:
        """A cancelled job leaves the queue (or the held slot) now, freeing its place."""
        if not job.future.cancelled():
            return
        if self._held is job:
            self._held = None
        elif job in self._waiting:
            self._waiting.remove(job)
        else:
            return                                # in a batch being formed or run: _run skips or finishes it
        self._dropped(job)
        self._gauge()

    async def _loop(self) -> None:
        while True:
            batch = await self._collect()
            self._gauge()
            await self._run(batch)

    async def _collect(self) -> list[_Job]:
        first, self._held = self._held or await self._take(None), None
        batch, n = [first], len(first.pairs)
        deadline = first.enqueued + self.max_wait
        while n < self.max_batch_pairs:
            nxt = await self._take(deadline)
            if nxt is None:
                break
            if n + len(nxt.pairs) > self.max_batch_pairs:
                self._held = nxt
                break
            batch.append(nxt)
            n += len(nxt.pairs)
        return batch

    async def _take(self, deadline: float | None) -> _Job | None:
        """The oldest waiting job; None when none came before `deadline` (monotonic; None: wait on)."""
        while not self._waiting:
            self._arrived.clear()
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return None
            try:
                await asyncio.wait_for(self._arrived.wait(), left)
            except asyncio.TimeoutError:
                return None
        return self._waiting.popleft()

    async def _run(self, batch: list[_Job]) -> None:
        live = [j for j in batch if not j.future.done()]        # a caller that went away is skipped
        for job in batch:
            if job.future.cancelled():
                self._dropped(job)
        if not live:
            return
        flat = [p for j in live for p in j.pairs]
        try:
            results = await self._call(flat, len(live))
        except Exception as e:                                  # noqa: BLE001 - isolated below
            if len(live) == 1:
                _settle(live[0], exc=e)
                return
            for job in live:                                    # one request's failure stays its own
                await self._run([job])
            return
        start = 0
        for job in live:
            _settle(job, results=results[start: start + len(job.pairs)])
            start += len(job.pairs)

    async def _call(self, flat: list[Pair], n_requests: int) -> list:
        t0 = time.perf_counter()
        results = await asyncio.get_running_loop().run_in_executor(self._pool, self.judge_fn, flat)
        if len(results) != len(flat):
            raise RuntimeError(f"judge returned {len(results)} results for {len(flat)} pairs")
        if self.metrics is not None:
            self.metrics.batch_done(len(flat), n_requests, time.perf_counter() - t0)
        return results

    def _dropped(self, job: _Job) -> None:
        if self.metrics is not None:
            self.metrics.dropped_pairs.inc(len(job.pairs))

    def _gauge(self) -> None:
        if self.metrics is not None:
            self.metrics.queue_depth.set(self.depth())


def _settle(job: _Job, *, results=None, exc: Exception | None = None) -> None:
    if job.future.done():
        return
    if exc is not None:
        job.future.set_exception(exc)
    else:
        job.future.set_result(results)
