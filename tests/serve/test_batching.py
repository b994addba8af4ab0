"""Queueing behaviour with a judge we control (a blocking / failing stand-in for the model):
a full queue answers 503 with Retry-After, a failing request never fails its batch-mates."""
from __future__ import annotations

import asyncio
import threading
import time

import httpx

from baer_fast.errors import InputError

from .test_routes import pairs_body, post_all


class FakeJudge:
    """`results` like Judge's: score = len(a) - len(b); 'poison' questions raise; `gate` blocks."""
    art = {"head": "fake"}
    experts = ["direct"]

    def __init__(self):
        self.calls, self.gate, self.entered = [], threading.Event(), threading.Event()
        self.gate.set()

    def results(self, qs, a, b):
        self.calls.append(list(qs))
        self.entered.set()
        self.gate.wait(30)
        if "poison" in qs:
            raise InputError("poisoned pair", field="question")
        return [{"score": float(len(x) - len(y)), "p_a": 0.5, "winner": "a", "head": "fake", "expert": None}
                for x, y in zip(a, b)]


def test_full_queue_answers_503_with_retry_after(serving):
    fake = FakeJudge()
    srv = serving(fake, max_queue=1, max_wait_ms=0, retry_after_s=2)
    fake.gate.clear()
    body = pairs_body(["q"], ["aa"], ["b"])

    async def scenario():
        async with httpx.AsyncClient(base_url=srv.url, timeout=60) as c:
            busy = asyncio.create_task(c.post("/v1/judge", json=body))       # occupies the engine
            await asyncio.get_running_loop().run_in_executor(None, fake.entered.wait, 10)
            queued = asyncio.create_task(c.post("/v1/judge", json=body))     # fills the queue
            deadline = time.monotonic() + 30
            while (await c.get("/health")).json()["queue_depth"] < 1:
                assert time.monotonic() < deadline, "the second request never queued"
                await asyncio.sleep(0.01)
            full = await c.post("/v1/judge", json=body)
            fake.gate.set()
            return full, await busy, await queued
    full, busy, queued = asyncio.run(scenario())
    assert full.status_code == 503 and full.headers["retry-after"] == "2"
    assert busy.status_code == queued.status_code == 200
    assert busy.json()["results"][0]["score"] == 1.0


def test_a_failing_request_never_fails_its_batch_mates(serving):
    fake = FakeJudge()
    srv = serving(fake, max_wait_ms=300, max_batch_pairs=100)
    bodies = [pairs_body([f"q{i}", f"q{i}"], ["a" * i, "b"], ["b", "a" * i]) for i in range(1, 6)]
    bodies.insert(2, pairs_body(["poison"], ["a"], ["b"]))
    answers = asyncio.run(post_all(srv.url, bodies, clients=len(bodies)))
    assert [r.status_code for r in answers] == [200, 200, 422, 200, 200, 200]
    assert "poisoned pair" in answers[2].json()["error"]
    for i, r in zip([1, 2, None, 3, 4, 5], answers):
        if i is not None:
            assert [x["score"] for x in r.json()["results"]] == [i - 1, 1 - i]
    merged = [c for c in fake.calls if len(c) > 2]
    assert merged and "poison" in merged[0]                  # they did share one engine call first
    assert sum(c == ["poison"] for c in fake.calls) == 1     # then each ran alone; only poison failed


def test_requests_wait_at_most_max_batch_pairs_together(serving):
    fake = FakeJudge()
    srv = serving(fake, max_wait_ms=200, max_batch_pairs=4)
    bodies = [pairs_body([f"q{i}"] * 2, ["a", "b"], ["b", "a"]) for i in range(6)]
    answers = asyncio.run(post_all(srv.url, bodies, clients=6))
    assert all(r.status_code == 200 for r in answers)
    assert all(len(c) <= 4 for c in fake.calls) and sum(len(c) for c in fake.calls) == 12
