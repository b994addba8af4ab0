"""FastAPI routes of the judge server: /v1/judge, /get_reward (OpenRLHF), /health, /metrics.

Bad requests get 4xx with the field named (400 malformed JSON, 401 token, 413 body, 422
schema), a full queue 503 with Retry-After; the judge is reached only through the batcher.
"""
from __future__ import annotations

import logging
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response

from baer_fast.errors import BaerError
from baer_fast.serve.batcher import MicroBatcher, QueueFull
from baer_fast.serve.config import ServeConfig
from baer_fast.serve.schemas import RESULT_FIELDS, JudgeRequest, RewardRequest

log = logging.getLogger("baer_fast")


def judge_fn(judge):
    """(question, a, b[, subset, category]) pairs -> result dicts, one engine call (runs on the
    batcher's thread); a missing or None subset is "default", as in a pairs file, and the keywords
    reach `judge.results` only when some pair has one."""
    def run(pairs):
        qs, a, b, subsets, categories = (list(x) for x in zip(*(tuple(p) + (None,) * (5 - len(p)) for p in pairs)))
        fields = {k: v for k, v in (("subsets", subsets), ("categories", categories)) if any(x is not None for x in v)}
        return [{k: r[k] for k in RESULT_FIELDS} for r in judge.results(qs, a, b, **fields)]
    return run


def create_app(judge, config: ServeConfig = ServeConfig()):
    from baer_fast.serve.guard import Guard, Observe
    from baer_fast.serve.metrics import Metrics

    metrics = Metrics()

    @asynccontextmanager
    async def lifespan(app):
        app.state.batcher = MicroBatcher(judge_fn(judge), max_batch_pairs=config.max_batch_pairs,
                                         max_wait_ms=config.max_wait_ms, max_queue=config.max_queue,
                                         metrics=metrics)
        app.state.batcher.start()
        yield
        await app.state.batcher.stop()

    app = FastAPI(title="baer-fast judge", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    app.add_exception_handler(RequestValidationError, _invalid)
    _routes(app, judge, config, metrics)
    return Observe(Guard(app, api_key=config.api_key, max_body_bytes=config.max_body_bytes), metrics)


def _routes(app, judge, config: ServeConfig, metrics) -> None:
    @app.post("/v1/judge")
    async def judge_pairs(body: JudgeRequest, request: Request):
        if len(body.pairs) > config.max_request_pairs:
            return _error(422, f"pairs: {len(body.pairs)} pairs, more than {config.max_request_pairs} per request")
        pairs = [(p.question, p.response_a, p.response_b, p.subset, p.category) for p in body.pairs]
        results = await _judged(request.app.state.batcher, pairs, config)
        return results if not isinstance(results, list) else {"results": results}

    @app.post("/get_reward")
    async def get_reward(body: RewardRequest, request: Request):
        return await _reward(request.app.state.batcher, body, config)

    @app.get("/health")
    async def health(request: Request):
        return {"status": "ok", "head": judge.art["head"], "experts": list(judge.experts),
                "allocation": judge.art.get("allocation"),          # subset -> experts of a per-subset head
                "queue_depth": request.app.state.batcher.depth(), "in_flight": metrics.in_flight}

    @app.get("/metrics")
    async def prometheus():
        data, ctype = metrics.render()
        return Response(data, media_type=ctype)


async def _judged(batcher, pairs, config: ServeConfig):
    """The batcher's results, or the error response that this request alone gets."""
    try:
        return await batcher.submit(pairs)
    except QueueFull:
        return _error(503, f"queue full ({config.max_queue} requests waiting); retry later",
                      headers={"Retry-After": str(config.retry_after_s)})
    except BaerError as e:
        return _error(422, str(e))
    except (RuntimeError, MemoryError) as e:          # e.g. the device ran out of memory for this batch
        log.warning("judge failed on a request: %s", e)
        return _error(503, f"the engine could not judge this request now: {e}",
                      headers={"Retry-After": str(config.retry_after_s)})


async def _reward(batcher, body: RewardRequest, config: ServeConfig):
    from baer_fast.integrations.trl import group_rewards, pair_texts, prompt_groups, round_robin

    if body.prompts is None:
        return _error(422, "prompts: required (each query's prompt, so that its completions can be compared)")
    if len(body.prompts) != len(body.query):
        return _error(422, f"prompts: {len(body.prompts)} prompts for {len(body.query)} queries")
    method = body.method or config.reward_method
    texts = [q[len(p):] if q.startswith(p) else q for q, p in zip(body.query, body.prompts)]
    gs = prompt_groups(body.prompts)
    todo = round_robin(gs)
    if len(todo) > config.max_request_pairs:
        return _error(422, f"query: the completions make {len(todo)} pairs, more than {config.max_request_pairs}")
    results = await _judged(batcher, list(zip(*pair_texts(body.prompts, texts, todo))), config) if todo else []
    if not isinstance(results, list):
        return results
    p = [r["p_a"] for r in results]
    rewards = group_rewards(len(texts), gs, todo, p, method=method)
    scores = rewards if method == "mean_win" else group_rewards(len(texts), gs, todo, p, method="mean_win")
    return {"rewards": rewards, "scores": scores}


def _error(status: int, message: str, *, headers: dict | None = None, detail=None):
    body = {"error": message} if detail is None else {"error": message, "detail": detail}
    return JSONResponse(body, status_code=status, headers=headers)


async def _invalid(request, exc):
    """400 for malformed JSON, else 422 naming the first bad field (the input is not echoed)."""
    errors = [{"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")}
              for e in exc.errors()]
    first = errors[0] if errors else {"loc": [], "msg": "invalid request", "type": ""}
    where = ".".join(str(x) for x in first["loc"])
    if any(e["type"] == "json_invalid" for e in errors):
        return _error(400, f"malformed JSON: {first['msg']}", detail=errors)
    ctype = request.headers.get("content-type", "")
    if first["loc"] == ["body"] and "json" not in ctype:
        return _error(415, f"send the body as JSON with 'Content-Type: application/json' (got {ctype!r})")
    return _error(422, f"{where}: {first['msg']}", detail=errors)
