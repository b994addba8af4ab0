"""Under --no-truncate an over-long pair is a 422 whose `detail` says where it sits in the request
(loc ["pairs", k], or /get_reward's ["query", i] and ["query", j]); the clients map that index back,
so the error names what their caller passed: the call's pair (JudgeClient), the trainer's completions
(remote_reward, as the in-process grpo_reward does), veRL's rollouts."""
from __future__ import annotations

import asyncio

import httpx
import pytest

from baer_fast.client import JudgeClient, JudgeServerError

LONG = "y " * 3000                      # longer than the tiny judge's context
PROMPTS = ["p1: "] * 3 + ["p2: "] * 3
COMPLETIONS = ["a", "b", "c", "x", LONG, "z"]


@pytest.fixture
def strict(default_judge, serving):
    from baer_fast.api import Judge, JudgeOptions
    judge = Judge(default_judge.engine, default_judge.art, options=JudgeOptions(truncate=False))
    judge.truncate_fix = "start serve without --no-truncate"           # as `baer-fast serve` sets it
    return serving(judge)


def _reason(text: str) -> str:
    """The message without its "pair ...: " prefix."""
    return text.split("): ", 1)[1] if "(0-based) of the call: " not in text else text.split("call: ", 1)[1]


def test_the_422_names_the_pair_as_data(strict):
    with httpx.Client(base_url=strict.url, timeout=120) as c:
        judged = c.post("/v1/judge", json={"pairs": [{"question": "q", "response_a": a, "response_b": "b"}
                                                     for a in ("a", "b", LONG)]})
        reward = c.post("/get_reward", json={"query": [p + x for p, x in zip(PROMPTS, COMPLETIONS)],
                                             "prompts": PROMPTS})
    assert judged.status_code == reward.status_code == 422
    body = judged.json()
    assert body["error"].startswith("pair 2 (0-based) of the call: ")          # the message existing clients read
    assert body["detail"] == [{"loc": ["pairs", 2], "msg": _reason(body["error"]), "type": "prompt_too_long"}]
    assert "without --no-truncate" in body["detail"][0]["msg"]
    body = reward.json()
    assert body["error"].startswith("pair of queries 3 and 4 (0-based): ")
    assert [d["loc"] for d in body["detail"]] == [["query", 3], ["query", 4]]
    assert {d["msg"] for d in body["detail"]} == {_reason(body["error"])}


def test_the_client_names_the_pair_of_its_call(strict):
    """Pair 5 of a call sent as requests of 4 is the server's pair 1 of the second request: the error
    said "pair 1 (0-based) of the call", an index into the caller's lists that is wrong."""
    client = JudgeClient(strict.url, max_pairs=4)
    args = (["q"] * 6, ["a"] * 5 + [LONG], ["b"] * 6)
    for call in (lambda: client.score(*args), lambda: asyncio.run(client.ascore(*args))):
        with pytest.raises(JudgeServerError) as err:
            call()
        assert err.value.status == 422 and err.value.pair == 5
        assert err.value.message.startswith("pair 5 (0-based) of the call: the ")
        assert "without --no-truncate" in err.value.reason


@pytest.mark.parametrize("asynchronous", [False, True])
def test_remote_reward_names_the_trainers_completions(strict, asynchronous):
    """remote_reward named the round-robin pair the server was sent ("pair 3 (0-based) of the call"),
    where grpo_reward in process names the trainer's completions 3 and 4."""
    from baer_fast.integrations.trl import remote_reward
    reward = remote_reward(strict.url, num_generations=3, asynchronous=asynchronous)
    with pytest.raises(JudgeServerError) as err:
        out = reward(PROMPTS, COMPLETIONS)
        asyncio.run(out) if asynchronous else out
    assert err.value.status == 422
    assert str(err.value).startswith("judge server answered 422: pair of completions 3 and 4 (0-based): the ")
    assert "without --no-truncate" in str(err.value)


def test_remote_online_dpo_and_verl_name_the_callers_items(strict):
    from baer_fast.integrations.trl import remote_reward
    from baer_fast.integrations.verl import compute_score_batch
    dpo = remote_reward(strict.url, trainer="online_dpo")
    with pytest.raises(JudgeServerError, match=r"answered 422: pair of completions 1 and 4 \(0-based\): "):
        dpo(["p"] * 6, ["a", LONG, "c", "d", "e", "f"])              # pair k of the call: completions k, k + 3
    infos = [{"question": p} for p in PROMPTS]
    with pytest.raises(JudgeServerError, match=r"answered 422: pair of rollouts 3 and 4 \(0-based\): "):
        compute_score_batch(["d"] * 6, COMPLETIONS, [None] * 6, infos, url=strict.url)
