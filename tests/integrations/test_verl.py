"""The veRL reward functions, judged by a stand-in client (no server): what they send and return."""
import logging

import numpy as np
import pytest

from baer_fast.errors import InputError
from baer_fast.integrations import verl


class Stub:
    """A stand-in JudgeClient: P(a beats b) = 0.75 when a is longer, else 0.25; records each call's pairs."""
    def __init__(self):
        self.calls = []

    def prob_a(self, q, a, b, **_):
        self.calls.append(list(zip(q, a, b)))
        return np.array([0.75 if len(x) > len(y) else 0.25 for x, y in zip(a, b)])


@pytest.fixture
def stub(monkeypatch):
    s = Stub()
    monkeypatch.setattr(verl, "client_for", lambda *a, **k: s)
    monkeypatch.setattr(verl, "_warned_lone", [], raising=False)
    return s


def _batch(questions, solutions, **kw):
    extra = np.array([{"question": q} for q in questions], dtype=object)      # veRL hands numpy object arrays
    return verl.compute_score_batch(np.array(["src"] * len(questions), dtype=object), solutions,
                                    [None] * len(questions), extra, **kw)


def test_a_call_of_lone_rollouts_is_an_error_naming_rollout_n(stub):
    """With rollout.n=1 (veRL's default n) or validation's val_kwargs.n=1, every rollout got the
    neutral 0.5, silently: a constant reward that trains nothing."""
    qs = ["what is 2+2?", "name a prime", "explain why"]
    with pytest.raises(InputError, match=r"single rollout.*rollout\.n to 2 or more.*val_kwargs\.n>=2.*"
                                         r"single_rollout=neutral"):
        _batch(qs, ["4", "7", "because"])
    assert stub.calls == []


@pytest.mark.parametrize("method, neutral", [("mean_win", 0.5), ("bradley_terry", 0.0)])
def test_lone_rollouts_judged_neutral_on_request_warn_once(stub, caplog, method, neutral):
    qs = ["what is 2+2?", "name a prime"]
    with caplog.at_level(logging.WARNING, logger="baer_fast"):
        assert _batch(qs, ["4", "7"], method=method, single_rollout="neutral") == [neutral, neutral]
        assert _batch(qs, ["4", "7"], method=method, single_rollout="neutral") == [neutral, neutral]
    assert [r.getMessage().count("single rollout") for r in caplog.records] == [1]
    assert stub.calls == []
    with pytest.raises(InputError, match="single_rollout must be"):
        _batch(qs, ["4", "7"], single_rollout="skip")


def test_a_lone_rollout_beside_groups_is_neutral_without_error(stub):
    got = _batch(["q", "q", "r"], ["long answer", "no", "alone"])
    assert got == [0.75, 0.25, 0.5]
    assert stub.calls == [[("q", "long answer", "no")]]


def test_a_missing_reference_answer_is_named_none(stub):
    """ground_truth=None was reported as 'got empty'."""
    with pytest.raises(InputError, match=r"\(got None\)"):
        verl.compute_score("gsm8k", "four", None, {"question": "2+2?"})
    with pytest.raises(InputError, match=r"\(got an empty string\)"):
        verl.compute_score("gsm8k", "four", " ", {"question": "2+2?"})
    assert stub.calls == []
