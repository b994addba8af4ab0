"""The judge server over loopback: answers match the in-process Judge, swaps negate across
requests and batches, bad requests get the right 4xx and the server keeps serving."""
from __future__ import annotations

import asyncio
import json

import httpx
import numpy as np
import pytest

from tests.fixtures.tolerances import HEAD_OPS, fp64_tol

from .conftest import texts

EPS32 = float(np.finfo(np.float32).eps)


def own_error(judge, qs, a, b, subsets=None) -> float:
    """The in-process Judge's own spread on these pairs over batch compositions and the swap:
    whole batch, one by one, reversed order, swapped. Tolerances are twice this (plus fp32 eps)."""
    subs = subsets or [None] * len(qs)
    full = judge.score(qs, a, b, subsets=subs).numpy()
    singles = np.array([float(judge.score([q], [x], [y], subsets=[g])[0]) for q, x, y, g in zip(qs, a, b, subs)])
    rev = judge.score(qs[::-1], a[::-1], b[::-1], subsets=subs[::-1]).numpy()[::-1]
    swapped = judge.score(qs, b, a, subsets=subs).numpy()
    return float(max(np.abs(full - singles).max(), np.abs(full - rev).max(), np.abs(full + swapped).max()))


def pairs_body(qs, a, b):
    return {"pairs": [{"question": q, "response_a": x, "response_b": y} for q, x, y in zip(qs, a, b)]}


async def post_all(url, bodies, *, clients=1, path="/v1/judge", headers=None):
    """POST every body, `clients` connections at a time; -> responses in body order."""
    out = [None] * len(bodies)
    queue = list(enumerate(bodies))

    async def worker():
        async with httpx.AsyncClient(timeout=120, headers=headers) as c:
            while queue:
                i, body = queue.pop(0)
                out[i] = await c.post(url + path, json=body)
    await asyncio.gather(*(worker() for _ in range(clients)))
    return out


def test_swaps_negate_across_requests_and_batches(default_judge, serving):
    srv = serving(default_judge, max_batch_pairs=5, max_wait_ms=5)
    qs, a, b = [], [], []
    for i in range(12):
        q, (x, y) = texts(i, 2)
        qs.append(q), a.append(x), b.append(y)
    tol = 2 * own_error(default_judge, qs, a, b) + 8 * EPS32
    # every pair and its swap in different requests, sent concurrently in shuffled order and sizes
    bodies, where = [], []
    order = np.random.default_rng(0).permutation(24)
    for chunk in np.array_split(order, 9):
        bodies.append(pairs_body(*zip(*[(qs[k % 12], a[k % 12], b[k % 12]) if k < 12 else
                                        (qs[k % 12], b[k % 12], a[k % 12]) for k in chunk])))
        where.append(list(chunk))
    answers = asyncio.run(post_all(srv.url, bodies, clients=4))
    s = {}
    for chunk, r in zip(where, answers):
        assert r.status_code == 200, r.text
        for k, res in zip(chunk, r.json()["results"]):
            s[int(k)] = res
    ref = default_judge.score(qs, a, b).numpy()
    for i in range(12):
        assert abs(s[i]["score"] + s[i + 12]["score"]) <= tol
        assert abs(s[i]["score"] - ref[i]) <= tol
        assert {s[i]["winner"], s[i + 12]["winner"]} == {"a", "b"} or s[i]["winner"] == s[i + 12]["winner"] == "tie"
        assert s[i]["head"] == "default" and s[i]["expert"] is None
        assert abs(s[i]["p_a"] + s[i + 12]["p_a"] - 1) <= tol


def test_200_requests_from_20_clients_each_answered_once(default_judge, serving):
    srv = serving(default_judge, max_batch_pairs=64, max_wait_ms=20)
    bodies = []
    for i in range(200):
        q, (x, y) = texts(1000 + i, 2)
        bodies.append(pairs_body([q, q], [x, y], [y, x]))         # a pair and its swap, in order
    answers = asyncio.run(post_all(srv.url, bodies, clients=20))
    for r in answers:
        assert r.status_code == 200
        res = r.json()["results"]
        # a pair and its swap in one batch: runs mirrored bit for bit, the float64 head's rounding only
        assert len(res) == 2 and abs(res[0]["score"] + res[1]["score"]) <= fp64_tol(HEAD_OPS, 1 + abs(res[0]["score"]))
    metrics = httpx.get(srv.url + "/metrics").text
    assert 'baer_requests_total{endpoint="/v1/judge",status="200"} 200.0' in metrics
    assert "baer_pairs_total 400.0" in metrics                   # no pair judged twice
    assert "baer_batch_requests_sum 200.0" in metrics
    merged = float(next(l.split()[-1] for l in metrics.splitlines() if l.startswith("baer_batch_requests_count")))
    assert merged < 200                                          # concurrent requests shared engine calls


def test_bad_requests_get_4xx_and_the_server_keeps_serving(default_judge, serving):
    srv = serving(default_judge, max_body_bytes=64 * 1024)
    ok = pairs_body(["q"], ["a"], ["b"])
    with httpx.Client(base_url=srv.url, timeout=60) as c:
        j = {"content-type": "application/json"}
        cases = [
            (c.post("/v1/judge", content=b'{"pairs": [', headers=j), 400, "malformed JSON"),
            (c.post("/v1/judge", json={"pairs": [{"question": 1, "response_a": "a", "response_b": "b"}]}),
             422, "pairs.0.question"),
            (c.post("/v1/judge", json={"pairs": [{"question": "q", "response_a": "a"}]}), 422, "pairs.0.response_b"),
            (c.post("/v1/judge", json={"pair": []}), 422, "pairs"),
            (c.post("/v1/judge", json={"pairs": "x"}), 422, "pairs"),
            (c.post("/v1/judge", json=[1, 2]), 422, "body"),
            (c.post("/v1/judge", content=json.dumps(ok)), 415, "application/json"),
            (c.post("/v1/judge", content=b"x" * 100_000, headers=j), 413, "larger than"),
            (c.post("/v1/judge", content=(b"x" * 10_000 for _ in range(10)), headers=j), 413, "larger than"),
            (c.post("/get_reward", json={"query": ["a", "b"]}), 422, "prompts"),
            (c.post("/get_reward", json={"query": ["a", "b"], "prompts": ["a"]}), 422, "prompts"),
            (c.post("/get_reward", json={"query": ["a"], "prompts": ["a"], "method": "vote"}), 422, "method"),
            (c.get("/v1/judge"), 405, ""),
            (c.post("/v1/judge", content=b'{"pairs": "\xff"}', headers=j), 400, ""),
            (c.post("/v1/judge", content=b"[" * 50_000, headers=j), 400, ""),
            (c.post("/v1/judge", content=b'{"pairs": [{"question": "\\udcff \\u0000", "response_a": "", '
                                         b'"response_b": "b"}]}', headers=j), 200, "results"),
        ]
        for r, status, needle in cases:
            assert r.status_code == status, (status, r.text)
            assert needle in r.text
            assert c.get("/health").status_code == 200
        r = c.post("/v1/judge", json=ok)
        assert r.status_code == 200 and len(r.json()["results"]) == 1
        assert c.post("/v1/judge", json={"pairs": []}).json() == {"results": []}
        assert "input" not in c.post("/v1/judge", json={"pairs": [{"question": 1}]}).json()["detail"][0]


def test_bearer_token_guards_every_endpoint_but_health(default_judge, serving):
    srv = serving(default_judge, api_key="s3cret")
    body = pairs_body(["q"], ["a"], ["b"])
    with httpx.Client(base_url=srv.url, timeout=60) as c:
        assert c.get("/health").status_code == 200
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret"},
                        {"Authorization": "Basic s3cret"}):
            for r in (c.post("/v1/judge", json=body, headers=headers), c.get("/metrics", headers=headers),
                      c.post("/get_reward", json={"query": []}, headers=headers)):
                assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
        good = {"Authorization": "Bearer s3cret"}
        assert c.post("/v1/judge", json=body, headers=good).status_code == 200
        assert c.get("/metrics", headers=good).status_code == 200


def test_get_reward_matches_the_trl_grpo_adapter(default_judge, serving):
    from baer_fast.integrations.trl import grpo_reward

    srv = serving(default_judge)
    prompts, completions = [], []
    for i in range(3):
        q, cs = texts(50 + i, 3)
        prompts += [q] * 3
        completions += cs
    local = grpo_reward(default_judge, num_generations=3)(prompts, completions)
    local_bt = grpo_reward(default_judge, num_generations=3, method="bradley_terry")(prompts, completions)
    body = {"query": [p + c for p, c in zip(prompts, completions)], "prompts": prompts, "labels": [""] * 9}
    r = httpx.post(srv.url + "/get_reward", json=body, timeout=60).json()
    bt = httpx.post(srv.url + "/get_reward", json={**body, "method": "bradley_terry"}, timeout=60).json()
    tol = 2 * own_error(default_judge, prompts[:3], completions[:3], completions[1:4]) + 8 * EPS32
    assert np.allclose(r["rewards"], local, atol=tol, rtol=0) and r["scores"] == r["rewards"]
    assert np.allclose(bt["rewards"], local_bt, atol=10 * tol, rtol=0)      # BT's MM fit amplifies input noise
    assert np.allclose(bt["scores"], local, atol=tol, rtol=0)
    for g in range(3):                                                      # each pair's two wins sum to 1
        assert sum(r["rewards"][3 * g: 3 * g + 3]) == pytest.approx(1.5, abs=fp64_tol(8, 3.0))   # p + (1 - p), 3 terms


def test_clients_and_reward_adapters_over_http(default_judge, serving):
    from baer_fast.client import JudgeClient
    from baer_fast.integrations import verl
    from baer_fast.integrations.trl import grpo_reward, online_dpo_reward, remote_reward

    srv = serving(default_judge)
    q, (x, y, z) = texts(7, 3)
    tol = 2 * own_error(default_judge, [q] * 3, [x, y, x], [y, z, z]) + 8 * EPS32     # every pair of x, y, z
    client = JudgeClient(srv.url)
    s = client.score([q, q], [x, y], [y, z])
    assert np.array_equal(s, asyncio.run(client.ascore([q, q], [x, y], [y, z])))
    assert np.allclose(s, default_judge.score([q, q], [x, y], [y, z]).numpy(), atol=tol, rtol=0)
    prompts, comps = [q] * 3, [x, y, z]
    local = grpo_reward(default_judge, num_generations=3)(prompts, comps)
    assert np.allclose(remote_reward(srv.url, num_generations=3)(prompts, comps), local, atol=tol, rtol=0)
    f = remote_reward(srv.url, num_generations=3, asynchronous=True)
    assert np.allclose(asyncio.run(f(prompts=prompts, completions=comps)), local, atol=tol, rtol=0)
    with pytest.raises(ValueError, match="synchronously"):      # trl's OnlineDPOTrainer never awaits
        remote_reward(srv.url, trainer="online_dpo", asynchronous=True)
    r = remote_reward(srv.url, trainer="online_dpo")(prompts=[q, q], completions=[x, y])
    assert np.allclose(r, online_dpo_reward(default_judge)(prompts=[q, q], completions=[x, y]), atol=tol, rtol=0)
    one = verl.compute_score("src", x, y, {"question": q}, url=srv.url)
    assert 0 <= one <= 1 and one == pytest.approx(float(default_judge.prob_a([q], [x], [y])[0]), abs=tol)   # sigmoid' <= 1/4
    batch = verl.compute_score_batch(["src"] * 3, comps, [None] * 3, [{"question": q}] * 3, url=srv.url)
    assert np.allclose(batch, local, atol=tol, rtol=0)


def test_each_pair_s_subset_reaches_a_per_subset_head(judge_dir, serving, tmp_path):
    from baer_fast.api import Judge
    from baer_fast.client import JudgeClient
    from tests.fixtures.data import PER_SUBSET, per_subset_head

    pairs = per_subset_head(judge_dir, str(tmp_path / "h.json"))
    judge = Judge.from_pretrained(judge_dir, head=str(tmp_path / "h.json"), kernels="torch")
    srv = serving(judge)
    assert httpx.get(srv.url + "/health", timeout=60).json()["allocation"] == PER_SUBSET
    qs, a, b = [p.question for p in pairs], [p.response_a for p in pairs], [p.response_b for p in pairs]
    subsets = [p.subset for p in pairs]
    tol = 2 * max(own_error(judge, qs, a, b, subsets), own_error(judge, qs, a, b)) + 8 * EPS32
    local = judge.score(qs, a, b, subsets=subsets).numpy()
    body = {"pairs": [{"question": q, "response_a": x, "response_b": y, "subset": g, "category": "math"}
                      for q, x, y, g in zip(qs, a, b, subsets)]}
    r = httpx.post(srv.url + "/v1/judge", json=body, timeout=60)
    assert r.status_code == 200
    remote = np.array([x["score"] for x in r.json()["results"]])
    assert np.allclose(remote, local, atol=tol, rtol=0)
    unpruned = np.array([x["score"] for x in asyncio.run(post_all(srv.url, [pairs_body(qs, a, b)]))[0].json()["results"]])
    assert np.abs(unpruned - local).max() > tol          # without the subset the head reads other evidence
    client = JudgeClient(srv.url)
    assert np.allclose(client.score(qs, a, b, subsets=subsets), local, atol=tol, rtol=0)
    assert np.allclose(asyncio.run(client.ascore(qs, a, b, subsets=subsets)), local, atol=tol, rtol=0)
    from baer_fast.api import torch_sigmoid
    from baer_fast.integrations import verl
    p_local = torch_sigmoid(judge.score(qs, a, b, subsets=subsets)).numpy()   # sigmoid' <= 1/4: tol holds
    for i in (0, 1):                                      # veRL: extra_info's subset reaches the head
        one = verl.compute_score("src", a[i], b[i], {"question": qs[i], "subset": subsets[i]}, url=srv.url)
        assert one == pytest.approx(p_local[i], abs=tol)
    batch = verl.compute_score_batch(["src"] * 2, b[:2], [None] * 2, [{"question": qs[0], "subset": "y"}] * 2,
                                     url=srv.url)
    p_y = float(judge.prob_a([qs[0]], [b[0]], [b[1]], subsets=["y"])[0])
    assert np.allclose(batch, [p_y, 1 - p_y], atol=tol, rtol=0)
    for bad, needle in (("", "pairs.0.subset"), (3, "pairs.0.subset")):
        r = httpx.post(srv.url + "/v1/judge", timeout=60,
                       json={"pairs": [{"question": "q", "response_a": "a", "response_b": "b", "subset": bad}]})
        assert r.status_code == 422 and needle in r.text
