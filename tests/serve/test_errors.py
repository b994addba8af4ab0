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
            (c.post("/v1/judge", json={**pair(), "subsets": ["math"]}), 422,
             "subsets: Extra inputs are not permitted"),     # beside "pairs" too (before: judged without it)
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


class FailingJudge:
    """A judge whose engine call raises `exc` for questions named "fail", else judges by length."""
    art = {"head": "fake"}
    experts = ["direct"]

    def __init__(self, exc):
        self.exc = exc

    def results(self, qs, a, b):
        if "fail" in qs:
            raise self.exc
        return [{"score": float(len(x) - len(y)), "p_a": 0.5, "winner": "a", "head": "fake", "expert": None}
                for x, y in zip(a, b)]


def test_an_engine_failure_is_503_and_an_unexpected_one_500_both_in_the_error_shape(serving):
    """A failed engine call (out of memory: RuntimeError, MemoryError) is a 503 with Retry-After; any
    other exception a 500, as {"error": ...} like every error answer (was text/plain
    "Internal Server Error"); the server serves on."""
    for exc, status in ((RuntimeError("CUDA out of memory"), 503), (MemoryError(), 503),
                        (KeyError("boom"), 500), (ValueError("bad"), 500)):
        srv = serving(FailingJudge(exc), retry_after_s=3)
        with httpx.Client(base_url=srv.url, timeout=60) as c:
            for path, body in (("/v1/judge", pair(question="fail")),
                               ("/get_reward", {"query": ["x1", "x2"], "prompts": ["fail", "fail"]})):
                r = c.post(path, json=body)
                assert r.status_code == status, (exc, path, r.text)
                assert r.headers["content-type"] == "application/json", (exc, path, r.text)
                assert type(exc).__name__ in r.json()["error"], r.text
                assert (r.headers.get("retry-after") == "3") == (status == 503), r.headers
            assert c.post("/v1/judge", json=pair(a="aa")).json()["results"][0]["score"] == 1.0
            assert f'status="{status}"' in c.get("/metrics").text


def test_a_route_that_raises_is_a_500_in_the_error_shape(serving, monkeypatch):
    """An exception outside the judge's call (here in /get_reward's rewards) is a 500 {"error"} too."""
    from baer_fast.integrations import trl

    def broken(*args, **kwargs):
        raise KeyError("boom")
    monkeypatch.setattr(trl, "group_rewards", broken)
    srv = serving(FailingJudge(None))
    r = httpx.post(srv.url + "/get_reward", json={"query": ["x1", "x2"], "prompts": ["p", "p"]}, timeout=60)
    assert r.status_code == 500 and r.headers["content-type"] == "application/json", r.text
    assert r.json()["error"].startswith("internal error: KeyError: 'boom'"), r.text
    assert httpx.get(srv.url + "/health", timeout=60).status_code == 200


def test_get_reward_over_the_pair_limit_is_a_422_naming_the_pairs(serving):
    """/get_reward's limit is on the round robin's pairs (n(n-1)/2 per prompt), not its queries."""
    srv = serving(FailingJudge(None), max_request_pairs=5)
    with httpx.Client(base_url=srv.url, timeout=60) as c:
        four = c.post("/get_reward", json={"query": ["pa", "pbb", "pccc", "pdddd"], "prompts": ["p"] * 4})
        ok = c.post("/get_reward", json={"query": ["pa", "pbb", "qc", "qdd", "qeee"], "prompts": ["p"] * 2 + ["q"] * 3})
    assert four.status_code == 422, four.text
    assert four.json()["error"] == "query: the completions make 6 pairs, more than 5", four.text
    assert ok.status_code == 200 and len(ok.json()["rewards"]) == 5, ok.text      # 1 + 3 pairs


def test_every_metric_the_server_exports_is_the_one_docs_serving_md_names():
    """The /metrics row of docs/serving.md lists each family as Prometheus writes it (counters with
    _total); baer_requests_in_flight was exported but not listed."""
    import pathlib
    import re

    from baer_fast.serve.metrics import Metrics
    doc = (pathlib.Path(__file__).parents[2] / "docs" / "serving.md").read_text()
    row = next(line for line in doc.splitlines() if line.startswith("| `GET /metrics`"))
    named = set(re.findall(r"`(baer_[a-z_]+)", row))
    exported = {m.name + ("_total" if m.type == "counter" else "") for m in Metrics().registry.collect()}
    assert named == exported
