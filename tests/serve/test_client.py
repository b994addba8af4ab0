"""JudgeClient checks its inputs as Judge does (before any request) and sends a conversation
question as its message list, so it scores what the in-process Judge scores."""
from __future__ import annotations

import asyncio

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
    with pytest.raises(InputError, match="got empty"):
        verl.compute_score("gsm8k", "four", "", {"question": "2+2?"})
