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
