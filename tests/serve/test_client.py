"""JudgeClient checks its inputs as Judge does (before any request) and sends a conversation
question as its message list, so it scores what the in-process Judge scores."""
from __future__ import annotations

import asyncio
import json
import threading
import time

import numpy as np
import pytest

from baer_fast.client import JudgeClient
from baer_fast.errors import InputError

from .test_routes import EPS32, own_error

TURNS = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}, {"role": "user", "content": "so?"}]


@pytest.mark.parametrize("args, field", [
    ((["q"], [None], ["b"]), "responses_a[0]"),
    ((["q"], ["a"], [5]), "responses_b[0]"),
    ((["q"], [b"a"], ["b"]), "responses_a[0]"),
    (("qq", "ab", "cd"), "questions"),
    (([{"role": "user"}], ["a"], ["b"]), "questions[0]"),
])
def test_bad_inputs_are_refused_before_any_request(args, field):
    client = JudgeClient("http://127.0.0.1:9")          # nothing listens there: no request is made
    for call in (lambda: client.score(*args), lambda: asyncio.run(client.ascore(*args))):
        with pytest.raises(InputError) as err:
            call()
        assert err.value.field == field


def test_a_conversation_is_judged_as_the_judge_judges_it(default_judge, serving):
    srv = serving(default_judge)
    qs, a, b = [TURNS, "q"], ["aa", "x"], ["b", "y"]
    tol = 2 * own_error(default_judge, qs, a, b) + 8 * EPS32
    remote = JudgeClient(srv.url).score(qs, a, b)
    assert np.allclose(remote, default_judge.score(qs, a, b).numpy(), atol=tol, rtol=0)
    as_text = default_judge.score([str(TURNS)], ["aa"], ["b"]).numpy()
    assert abs(remote[0] - as_text[0]) > tol             # not the message list's repr


def test_a_call_larger_than_one_request_is_sent_as_several_in_order(default_judge, serving):
    """A veRL step of 256 prompts x 8 rollouts is 7,168 round-robin pairs: one request of them was a 422
    (max_request_pairs), which stopped training."""
    srv = serving(default_judge, max_request_pairs=2)
    qs, a, b = ["q"] * 5, ["one", "two", "three", "four", "five"], ["5", "4", "3", "2", "1"]
    client = JudgeClient(srv.url, max_pairs=2)
    got = client.score(qs, a, b)
    assert np.array_equal(got, asyncio.run(client.ascore(qs, a, b)))
    assert np.array_equal(got, np.concatenate([JudgeClient(srv.url, max_pairs=2).score(qs[k:k + 2], a[k:k + 2], b[k:k + 2])
                                                for k in (0, 2, 4)]))


def test_an_unreachable_server_is_a_judge_server_error_after_the_retries():
    """httpx's ConnectError escaped, though the docs say errors raise JudgeServerError."""
    from baer_fast.client import JudgeServerError
    from tests.serve.conftest import free_port
    with pytest.raises(JudgeServerError, match="cannot reach") as e:
        JudgeClient(f"http://127.0.0.1:{free_port()}", retries=1).score(["q"], ["a"], ["b"])
    assert e.value.status == 0


def test_verl_takes_a_numeric_reference_answer(monkeypatch):
    from baer_fast.integrations import verl

    class Stub:
        def prob_a(self, q, a, b, **_):
            assert b == ["4"]
            return np.array([0.25])
    monkeypatch.setattr(verl, "client_for", lambda *a, **k: Stub())
    assert verl.compute_score("gsm8k", "four", 4, {"question": "2+2?"}) == 0.25
    with pytest.raises(InputError, match="got an empty string"):
        verl.compute_score("gsm8k", "four", "", {"question": "2+2?"})


class StandIn:
    """A judge server stand-in (http.server on a thread) that counts the judge requests it gets: the
    first `drop` are closed unanswered, and with `hold` each waits unanswered until `release()`."""

    def __init__(self, *, hold=False, drop=0):
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        self.count, self.released = 0, threading.Event()
        stand = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                pairs = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["pairs"]
                stand.count += 1
                if stand.count <= drop:
                    self.close_connection = True          # no status line: the client sees a dropped connection
                    return
                if hold:
                    stand.released.wait(60)
                body = json.dumps({"results": [{"score": 0.0, "p_a": 0.5} for _ in pairs]}).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:                           # the client hung up
                    pass

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def requests_after(self, want: int) -> int:
        """The request count once at least `want` arrived (or 30 s passed)."""
        deadline = time.monotonic() + 30
        while self.count < want and time.monotonic() < deadline:
            time.sleep(0.01)
        return self.count

    def stop(self):
        self.released.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_timeout_is_reported_as_one_and_not_re_sent(asynchronous):
    """A read timeout (a slow, healthy judge) was retried as if the server were down: the same pairs
    were judged `retries` more times, and the error said 'cannot reach'."""
    from baer_fast.client import JudgeServerError, JudgeServerTimeout
    stand = StandIn(hold=True)
    client = JudgeClient(stand.url, timeout=0.2, retries=3)
    try:
        with pytest.raises(JudgeServerTimeout, match=r"timeout=0\.2 s.*JudgeClient\(timeout=") as e:
            asyncio.run(client.ascore(["q"], ["a"], ["b"])) if asynchronous else client.score(["q"], ["a"], ["b"])
        assert isinstance(e.value, JudgeServerError) and e.value.status == 0
        assert "cannot reach" not in str(e.value)
        assert stand.requests_after(1) == 1
    finally:
        stand.stop()
    assert stand.count == 1


def test_a_connection_dropped_before_an_answer_is_retried():
    """A restarting server drops the connection before answering: that request is sent again."""
    stand = StandIn(drop=1)
    try:
        assert JudgeClient(stand.url, retries=1).score(["q"], ["a"], ["b"]).tolist() == [0.0]
        assert JudgeClient(stand.url, retries=1).score(["q"], ["a"], ["b"]).tolist() == [0.0]
    finally:
        stand.stop()
    assert stand.count == 3


@pytest.mark.parametrize("asynchronous", [False, True])
def test_remote_reward_passes_timeout_and_retries_to_its_client(asynchronous):
    """remote_reward took neither: a judge restart longer than the client's default ~10 s of retries
    stopped training, and a slow judge could not be given more time."""
    from baer_fast.client import JudgeServerError, JudgeServerTimeout
    from baer_fast.integrations.trl import remote_reward

    def call(f):
        out = f(prompts=["q", "q"], completions=["a", "bb"])
        return asyncio.run(out) if asynchronous else out

    held, dropping = StandIn(hold=True), StandIn(drop=1)
    try:
        with pytest.raises(JudgeServerTimeout, match=r"timeout=0\.2 s"):
            call(remote_reward(held.url, num_generations=2, asynchronous=asynchronous, timeout=0.2))
        with pytest.raises(JudgeServerError, match="after 0 retries"):      # the default 10 would get an answer
            call(remote_reward(dropping.url, num_generations=2, asynchronous=asynchronous, retries=0))
        assert call(remote_reward(dropping.url, num_generations=2, asynchronous=asynchronous, retries=0)) == [0.5, 0.5]
    finally:
        held.stop()
        dropping.stop()
    with pytest.raises(ValueError, match="retries must be"):
        remote_reward(held.url, num_generations=2, retries=-1)
    with pytest.raises(ValueError, match="timeout must be"):
        remote_reward(held.url, num_generations=2, timeout=0)


def test_an_error_in_a_later_request_of_a_call_says_where_that_request_sits(serving):
    """An error that names no pair says which request of the call got it (an over-long pair is named
    by its place in the call: test_over_long.py)."""
    from baer_fast.client import JudgeServerError

    from .test_batching import FakeJudge
    srv = serving(FakeJudge(), max_request_pairs=3)
    client = JudgeClient(srv.url, max_pairs=4)
    args = (["q"] * 6, ["a"] * 6, ["b"] * 6)
    for call in (lambda: client.score(*args), lambda: asyncio.run(client.ascore(*args))):
        with pytest.raises(JudgeServerError) as err:
            call()
        assert err.value.status == 422 and err.value.pair is None
        assert "more than 3 per request [the request of pairs 0..3 (0-based) of the call" in str(err.value)


@pytest.mark.parametrize("max_pairs", [0, -1, 2.5, True])
def test_a_bad_max_pairs_is_refused_when_the_client_is_made(max_pairs):
    """max_pairs=0 surfaced at the first call as range()'s 'arg 3 must not be zero', after the
    inputs were checked; retries and timeout were already refused up front."""
    with pytest.raises(ValueError, match="max_pairs must be"):
        JudgeClient("http://127.0.0.1:9", max_pairs=max_pairs)
