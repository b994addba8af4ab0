"""Micro-batching: concurrent requests are queued and merged into one engine call.

A batch starts with the oldest waiting request and takes the next ones while they fit in
`max_batch_pairs` and the first has waited less than `max_wait_ms`; requests that queued while
the engine was busy join at once. Pairs of one batch go to `judge_fn` in one call, so pairs
that share a question share its prefix across requests. Each caller gets its own slice back,
in order. When a merged call fails, every request of it is rerun alone, so one request's
failure reaches only that request. `judge_fn` runs on one worker thread (one engine call at
a time); the event loop stays free for other requests.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import time
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
        self.queue: asyncio.Queue = asyncio.Queue(maxsize=max_queue)
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="baer-engine")
        self._held: _Job | None = None        # took from the queue, did not fit the last batch
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> None:
        """Finish what is queued, then stop the worker (the server stopped taking requests first)."""
        while self._held is not None or not self.queue.empty():
            await asyncio.sleep(0.01)
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self._pool.shutdown(wait=True)

    def depth(self) -> int:
        return self.queue.qsize() + (self._held is not None)

    async def submit(self, pairs: Sequence[Pair]) -> list:
        """Results of `pairs`, in order; raises QueueFull, or what judging this request raised."""
        if not pairs:
            return []
        job = _Job(pairs, asyncio.get_running_loop().create_future())
        try:
            self.queue.put_nowait(job)
        except asyncio.QueueFull:
            raise QueueFull() from None
        self._gauge()
        return await job.future

    async def _loop(self) -> None:
        while True:
            batch = await self._collect()
            self._gauge()
            await self._run(batch)

    async def _collect(self) -> list[_Job]:
        first, self._held = self._held or await self.queue.get(), None
        batch, n = [first], len(first.pairs)
        deadline = first.enqueued + self.max_wait
        while n < self.max_batch_pairs:
            try:
                nxt = self.queue.get_nowait()
            except asyncio.QueueEmpty:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                try:
                    nxt = await asyncio.wait_for(self.queue.get(), left)
                except asyncio.TimeoutError:
                    break
            if n + len(nxt.pairs) > self.max_batch_pairs:
                self._held = nxt
                break
            batch.append(nxt)
            n += len(nxt.pairs)
        return batch

    async def _run(self, batch: list[_Job]) -> None:
        live = [j for j in batch if not j.future.done()]        # a caller that went away is skipped
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
