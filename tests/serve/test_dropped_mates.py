"""A request whose client hung up before its engine call started is dropped whole, and its would-be
batch-mates are judged exactly as if it had never come: their scores are the bits of one in-process
call on their pairs alone. Both places it can be dropped from: the queue (the engine busy) and a
batch still gathering batch-mates (`max_wait_ms`). Work already in an engine call runs to the end
(docs/serving.md, "Micro-batching", says why)."""
from __future__ import annotations

import json
import socket
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from .conftest import texts
from .test_disconnect import metric, wait_until
from .test_routes import pairs_body


class Recorded:
    """The real judge, recording each engine call's questions; with `gate` cleared a call waits."""

    def __init__(self, judge):
        self.judge, self.art, self.experts = judge, judge.art, judge.experts
        self.calls, self.gate, self.entered = [], threading.Event(), threading.Event()
        self.gate.set()

    def results(self, qs, a, b, **kw):
        self.calls.append(list(qs))
        self.entered.set()
        self.gate.wait(60)
        return self.judge.results(qs, a, b, **kw)


def request(i: int, n: int):
    """n pairs of one question, deterministic in i."""
    q, cs = texts(i, n + 1)
    return [q] * n, cs[:n], cs[1:]


def state(url) -> tuple[int, int]:
    h = httpx.get(url + "/health", timeout=30).json()
    return h["queue_depth"], h["in_flight"]


@pytest.mark.parametrize("where", ["queue", "gathering batch"])
def test_a_dropped_request_leaves_no_trace_in_its_batch_mates(default_judge, serving, where):
    judge = Recorded(default_judge)
    srv = serving(judge, max_wait_ms=0 if where == "queue" else 4000)
    port = int(srv.url.rsplit(":", 1)[1])
    gone, b, c = request(700, 3), request(701, 2), request(702, 2)
    post = lambda r: httpx.post(srv.url + "/v1/judge", json=pairs_body(*r), timeout=120)   # noqa: E731
    with ThreadPoolExecutor(3) as pool:
        if where == "queue":
            judge.gate.clear()
            busy = pool.submit(post, request(703, 1))
            assert judge.entered.wait(60)                        # the engine is busy: the next ones queue
        body = json.dumps(pairs_body(*gone)).encode()
        sock = socket.create_connection(("127.0.0.1", port))
        sock.sendall(b"POST /v1/judge HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n" % len(body) + body)
        first = pool.submit(post, b)
        taken = (2, 3) if where == "queue" else (0, 2)           # (queue depth, in flight) once both are in
        wait_until(lambda: state(srv.url) == taken, f"both requests taken {taken}")
        sock.close()
        wait_until(lambda: metric(srv.url, "baer_abandoned_requests_total") == 1, "the hang-up noticed")
        second = pool.submit(post, c)
        wait_until(lambda: state(srv.url)[1] == 2 + (where == "queue"), "the third request taken")
        judge.gate.set()
        got = [r.json()["results"] for r in (first.result(), second.result())]
        if where == "queue":
            assert busy.result().status_code == 200
    alone = default_judge.results(b[0] + c[0], b[1] + c[1], b[2] + c[2])    # one call on their pairs alone
    assert got[0] + got[1] == [{k: r[k] for k in got[0][0]} for r in alone]    # bit for bit
    assert judge.calls[-1] == b[0] + c[0]                        # one engine call, without the dropped pairs
    assert not any(gone[0][0] in call for call in judge.calls)
    assert metric(srv.url, "baer_dropped_pairs_total") == 3
