"""A real `baer-fast serve` subprocess on a free loopback port: SIGTERM mid-load answers every
request it had taken, then refuses new connections and exits 0."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import httpx

from tests.fixtures.tolerances import HEAD_OPS, fp64_tol

from .conftest import free_port, texts
from .test_routes import pairs_body


def _wait_healthy(url, proc, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read().decode()
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.2)
    raise AssertionError("server did not come up")


def test_sigterm_mid_load_answers_every_taken_request_and_exits_0(judge_dir):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "BAER_TEST_KEY": "k3y"}
    proc = subprocess.Popen([sys.executable, "-m", "baer_fast.cli", "-q", "serve", "--model", judge_dir,
                             "--port", str(port), "--kernels", "torch", "--max-wait-ms", "5000",
                             "--api-key-env", "BAER_TEST_KEY"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _wait_healthy(url, proc)
        auth = {"Authorization": "Bearer k3y"}
        answers = [None] * 24

        def send(i):
            q, (x, y) = texts(500 + i, 2)
            try:
                answers[i] = httpx.post(url + "/v1/judge", json=pairs_body([q, q], [x, y], [y, x]),
                                        headers=auth, timeout=60)
            except httpx.TransportError as e:
                answers[i] = e
        threads = [threading.Thread(target=send, args=(i,)) for i in range(24)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 60
        while httpx.get(url + "/health", timeout=10).json()["in_flight"] < 24:     # all 24 taken
            assert time.monotonic() < deadline, "the requests never reached the server"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)  # they are held by the 5 s batching wait, or being judged
        for t in threads:
            t.join(60)
        code = proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert code == 0, proc.stderr.read().decode()
    for r in answers:                     # taken before SIGTERM: every one answered, correctly
        assert isinstance(r, httpx.Response) and r.status_code == 200, r
        a, b = r.json()["results"]
        # a pair and its swap in one request: mirrored runs, the float64 head's rounding only (its
        # terms are O(1) even where the score is near 0: scale 1 + |score|)
        assert abs(a["score"] + b["score"]) <= fp64_tol(HEAD_OPS, 1 + abs(a["score"]))
    try:
        httpx.get(url + "/health", timeout=2)
        raise AssertionError("still accepting connections after SIGTERM")
    except httpx.TransportError:
        pass
