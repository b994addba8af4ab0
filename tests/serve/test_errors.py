"""Error answers in the shape docs/serving.md shows: every one is {"error": ...}; a schema error
names the field as `pairs.0.question`; an empty body or one that is not UTF-8 is malformed JSON
(400). A question may be a conversation, checked before it is queued."""
from __future__ import annotations

import httpx

from .test_batching import FakeJudge

J = {"content-type": "application/json"}


def pair(question="q", a="a", b="b") -> dict:
    return {"pairs": [{"question": question, "response_a": a, "response_b": b}]}


def test_every_error_has_the_documented_shape(serving):
    srv = serving(FakeJudge())
    with httpx.Client(base_url=srv.url, timeout=60) as c:
        cases = [
            (c.post("/v1/judge", json=pair(a=4)), 422, "pairs.0.response_a: Input should be a valid string"),
            (c.post("/v1/judge", json=pair(question=1)), 422,
             "pairs.0.question: Input should be a valid string or a list of {role, content} messages"),
            (c.post("/v1/judge", json={"pairs": [{"question": "q", "response_a": "a"}]}), 422,
             "pairs.0.response_b: Field required"),
            (c.post("/get_reward", json={"query": "x"}), 422, "query: Input should be a valid list"),
            (c.post("/v1/judge", content=b"", headers=J), 400, "malformed JSON: the body is empty"),
            (c.post("/v1/judge", content=b'{"pairs": [', headers=J), 400, "malformed JSON: Expecting value"),
            (c.post("/v1/judge", content=b'{"pairs": "\xff"}', headers=J), 400, "malformed JSON: 'utf-8' codec"),
            (c.post("/v1/judge", json={"pairs": [{**pair()["pairs"][0], "subsets": "math"}]}), 422,
             "pairs.0.subsets: Extra inputs are not permitted"),       # a typo is not silently dropped
            (c.get("/v1/judge"), 405, "Method Not Allowed"),
            (c.get("/nowhere"), 404, "Not Found"),
        ]
        for r, status, start in cases:
            assert r.status_code == status, r.text
            assert r.json()["error"].startswith(start), r.text
        assert "body" not in c.post("/v1/judge", json=pair(a=4)).json()["detail"][0]["loc"]
        record = {**pair()["pairs"][0], "id": "p1", "label": "a", "split": "test", "meta": {"k": 1}}
        assert c.post("/v1/judge", json={"pairs": [record]}).status_code == 200     # a pairs-file record as is


def test_a_conversation_question_is_checked_then_judged_as_turns(serving):
    fake = FakeJudge()
    srv = serving(fake)
    turns = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"},
             {"role": "user", "content": "and?"}]
    with httpx.Client(base_url=srv.url, timeout=60) as c:
        assert c.post("/v1/judge", json=pair(question=turns, a="aa")).json()["results"][0]["score"] == 1.0
        bad = c.post("/v1/judge", json=pair(question=turns[1:]))
        assert bad.status_code == 422
        assert bad.json()["error"].startswith("pairs.0.question: conversation: message 0: expected a 'user' turn")
        assert c.post("/v1/judge", json=pair(question=["hi"])).status_code == 422
    assert fake.calls == [[(("user", "hi"), ("assistant", "yo"), ("user", "and?"))]]


def test_get_reward_names_an_over_long_query_by_its_own_index(default_judge, serving):
    """Under --no-truncate, an over-long completion is a 422 naming the request's queries, not
    the index of a round-robin pair the server made up (was "pair 3 (0-based) of the call")."""
    from baer_fast.api import Judge, JudgeOptions
    strict = Judge(default_judge.engine, default_judge.art, options=JudgeOptions(truncate=False))
    srv = serving(strict)
    prompts = ["p1: "] * 3 + ["p2: "] * 3
    query = [p + c for p, c in zip(prompts, ["a", "b", "c", "x", "y " * 3000, "z"])]
    with httpx.Client(base_url=srv.url, timeout=120) as c:
        r = c.post("/get_reward", json={"query": query, "prompts": prompts})
    assert r.status_code == 422, r.text
    assert r.json()["error"].startswith("pair of queries 3 and 4 (0-based): "), r.text
