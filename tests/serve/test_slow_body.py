"""A client that sends its headers and then stalls, or trickles, its body got a connection and a
worker's memory for as long as it liked: the body now has `body_timeout_s` to arrive, then the
answer is 408 with the connection closed, counted in baer_body_timeouts_total."""
from __future__ import annotations

import json
import select
import socket
import time

import httpx
import pytest

from .test_batching import FakeJudge
from .test_disconnect import metric, wait_until
from .test_routes import pairs_body

BODY = json.dumps(pairs_body(["q"], ["aa"], ["b"])).encode()
HEAD = (b"POST /v1/judge HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n" % len(BODY))


def answer(sock, *, trickle: bytes = b"", within: float = 10.0) -> bytes | None:
    """What the server sends until it closes the connection, sending `trickle` a byte every 0.05 s
    meanwhile; None when a trickled byte reached the server after it had answered and closed, and
    its reset dropped the answer unread (a race of the two sides' timing: the metrics still say)."""
    got, deadline, rest = b"", time.monotonic() + within, trickle
    while time.monotonic() < deadline:
        try:
            if select.select([sock], [], [], 0.05)[0]:
                chunk = sock.recv(65536)
                if not chunk:
                    return got
                got += chunk
            elif rest:
                sock.sendall(rest[:1])
                rest = rest[1:]
        except (ConnectionResetError, BrokenPipeError):
            return got or None
    raise AssertionError(f"the connection was still open after {within} s; got {got!r}")


@pytest.mark.parametrize("how", ["stall", "trickle"])
def test_a_body_that_does_not_arrive_in_time_is_408_and_the_server_serves_on(serving, how):
    srv = serving(FakeJudge(), body_timeout_s=0.5)
    port = int(srv.url.rsplit(":", 1)[1])
    t0 = time.monotonic()
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(HEAD + BODY[:5])
        got = answer(s, trickle=BODY[5:] if how == "trickle" else b"")
    assert 0.4 < time.monotonic() - t0 < 5
    if got is not None or how == "stall":         # a stalled client sends nothing that could reset
        assert got.startswith(b"HTTP/1.1 408 "), got
        assert b"did not arrive within 0.5 s" in got and b"connection: close" in got.lower()
    wait_until(lambda: 'status="408"' in httpx.get(srv.url + "/metrics", timeout=30).text, "the 408 counted")
    assert metric(srv.url, "baer_body_timeouts_total") == 1
    assert metric(srv.url, 'baer_requests_total{endpoint="/v1/judge",status="408"}') == 1
    assert 'status="500"' not in httpx.get(srv.url + "/metrics", timeout=30).text
    assert httpx.post(srv.url + "/v1/judge", json=pairs_body(["q"], ["aa"], ["b"]), timeout=30).status_code == 200


def test_a_body_sent_in_parts_within_the_timeout_is_judged(serving):
    srv = serving(FakeJudge(), body_timeout_s=2.0)
    port = int(srv.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(HEAD + BODY[:5])
        time.sleep(0.3)
        s.sendall(BODY[5:])
        s.settimeout(30)
        got = s.recv(65536)
    assert got.startswith(b"HTTP/1.1 200 "), got
    assert metric(srv.url, "baer_body_timeouts_total") == 0
