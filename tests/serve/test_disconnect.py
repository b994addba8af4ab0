"""A client that hangs up while its request waits: the request leaves the queue at once, its
pairs never reach the judge, and the hang-up is counted (baer_abandoned_requests_total,
baer_dropped_pairs_total)."""
from __future__ import annotations

import asyncio
import json
import socket
import time
from concurrent.futures import ThreadPoolExecutor

import httpx

from baer_fast.serve.batcher import MicroBatcher

from .test_batching import FakeJudge
from .test_routes import pairs_body


def wait_until(check, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.01)


def metric(url: str, name: str) -> float:
    line = next(x for x in httpx.get(url + "/metrics", timeout=30).text.splitlines() if x.startswith(name + " "))
    return float(line.split()[-1])


def test_a_cancelled_job_leaves_the_queue_unjudged():
    calls = []

    async def scenario():
        b = MicroBatcher(lambda pairs: calls.append(pairs) or [0.0] * len(pairs), max_batch_pairs=8,
                         max_wait_ms=0, max_queue=1)
        gone = asyncio.ensure_future(b.submit([("gone", "a", "b")]))
        await asyncio.sleep(0)                     # queued; the worker is not started yet
        assert b.depth() == 1
        gone.cancel()
        await asyncio.sleep(0)
        assert b.depth() == 0                      # its place is free at once
        b.start()
        assert await b.submit([("kept", "a", "b")]) == [0.0]     # max_queue=1: no QueueFull
        await b.stop()
    asyncio.run(scenario())
    assert calls == [[("kept", "a", "b")]]


def test_a_client_that_hangs_up_while_queued_is_never_judged(serving):
    fake = FakeJudge()
    srv = serving(fake, max_queue=1, max_wait_ms=0)
    port = int(srv.url.rsplit(":", 1)[1])
    health = lambda: httpx.get(srv.url + "/health", timeout=30).json()   # noqa: E731
    fake.gate.clear()
    with ThreadPoolExecutor(2) as pool:
        busy = pool.submit(httpx.post, srv.url + "/v1/judge", json=pairs_body(["busy"], ["aa"], ["b"]), timeout=60)
        assert fake.entered.wait(30)                                  # the engine is busy with it
        body = json.dumps(pairs_body(["hung up"] * 3, ["a"] * 3, ["b"] * 3)).encode()
        sock = socket.create_connection(("127.0.0.1", port))
        sock.sendall(b"POST /v1/judge HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n" % len(body) + body)
        wait_until(lambda: health()["queue_depth"] == 1, "the raw request queued")
        sock.close()
        wait_until(lambda: health()["queue_depth"] == 0, "the hung-up request left the queue")
        later = pool.submit(httpx.post, srv.url + "/v1/judge", json=pairs_body(["later"], ["a"], ["b"]), timeout=60)
        wait_until(lambda: health()["queue_depth"] == 1, "the next request queued (no 503)")
        fake.gate.set()
        assert busy.result().status_code == 200 and later.result().status_code == 200
    assert [c for c in fake.calls if "hung up" in c] == []
    assert metric(srv.url, "baer_dropped_pairs_total") == 3
    assert metric(srv.url, "baer_abandoned_requests_total") == 1
    assert metric(srv.url, "baer_pairs_total") == 2


def test_a_client_that_hangs_up_mid_body_is_499_not_a_server_error(serving):
    """Nothing is answered to a client gone before its body arrived: that is a hang-up (499 in
    baer_requests_total), not a 500 that would page whoever watches the server's error rate."""
    srv = serving(FakeJudge())
    port = int(srv.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b"POST /v1/judge HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 100\r\n\r\n{\"pairs\"")
        time.sleep(0.2)
    name = 'baer_requests_total{endpoint="/v1/judge",status="499"}'
    wait_until(lambda: name in httpx.get(srv.url + "/metrics", timeout=30).text, "the hang-up counted")
    assert metric(srv.url, name) == 1.0
    assert 'status="500"' not in httpx.get(srv.url + "/metrics", timeout=30).text
