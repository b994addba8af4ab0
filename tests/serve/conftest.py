"""Servers on free loopback ports (uvicorn in a thread) for the route tests; the model and the
default-head Judge are the root conftest's `judge_dir` and `default_judge`."""
from __future__ import annotations

import socket
import threading
import time

import pytest

pytest.importorskip("fastapi", reason="the server needs the [serve] extra (in [dev])")

WORDS = "the answer is correct because python code returns the sum of a list of numbers".split()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def texts(i: int, k: int = 3) -> tuple[str, list[str]]:
    """A question and k distinct completions, deterministic in i."""
    import random
    rng = random.Random(i)
    q = f"q{i} " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 8))) + "?"
    return q, [f"c{j} " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 12))) for j in range(k)]


class Running:
    """uvicorn serving `create_app(judge, config)` on a thread; .url, .stop()."""

    def __init__(self, judge, config):
        import uvicorn
        from baer_fast.serve.app import create_app
        self.server = uvicorn.Server(uvicorn.Config(create_app(judge, config), host="127.0.0.1", port=config.port,
                                                    log_level="warning", lifespan="on"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{config.port}"
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("test server did not start")
            time.sleep(0.02)

    def stop(self):
        self.server.should_exit = True
        self.thread.join(30)


@pytest.fixture
def serving():
    """serving(judge, **config) -> Running; stopped after the test."""
    from baer_fast.serve.config import ServeConfig
    started = []

    def start(judge, **kw):
        started.append(Running(judge, ServeConfig(port=free_port(), **kw)))
        return started[-1]
    yield start
    for r in started:
        r.stop()
