"""FastAPI routes of the judge server: /v1/judge, /get_reward (OpenRLHF), /health, /metrics.

Bad requests get 4xx with the field named (400 malformed or empty JSON, 401 token, 413 body,
422 schema or an over-long pair, placed in `detail`), a full queue or a failed engine call 503 with
Retry-After, anything else 500; every error body is {"error": message}, some with "detail". The
judge is reached only through the batcher; a client that hangs up while its request waits cancels
it (499, never sent), so its pairs are not judged.
"""
from __future__ import annotations

import asyncio
import logging
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException

from baer_fast.errors import BaerError, PromptTooLong
from baer_fast.serve.batcher import MicroBatcher, QueueFull
from baer_fast.serve.config import ServeConfig
from baer_fast.serve.guard import NOT_JSON
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
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(Exception, _internal)
    _routes(app, judge, config, metrics)
    return Observe(Guard(app, api_key=config.api_key, max_body_bytes=config.max_body_bytes,
                         body_timeout_s=config.body_timeout_s, metrics=metrics), metrics)


def _routes(app, judge, config: ServeConfig, metrics) -> None:
    @app.post("/v1/judge")
    async def judge_pairs(body: JudgeRequest, request: Request):
        if len(body.pairs) > config.max_request_pairs:
            return _error(422, f"pairs: {len(body.pairs)} pairs, more than {config.max_request_pairs} per request")
        pairs = [(p.question, p.response_a, p.response_b, p.subset, p.category) for p in body.pairs]
        results = await _judged(request, pairs, config, metrics)
        return results if not isinstance(results, list) else {"results": results}

    @app.post("/get_reward")
    async def get_reward(body: RewardRequest, request: Request):
        return await _reward(request, body, config, metrics)

    @app.get("/health")
    async def health(request: Request):
        return {"status": "ok", "head": judge.art["head"], "experts": list(judge.experts),
                "allocation": judge.art.get("allocation"),          # subset -> experts of a per-subset head
                "queue_depth": request.app.state.batcher.depth(), "in_flight": metrics.in_flight}

    @app.get("/metrics")
    async def prometheus():
        data, ctype = metrics.render()
        return Response(data, media_type=ctype)


async def _judged(request: Request, pairs, config: ServeConfig, metrics, *, todo=None):
    """The batcher's results, or the error response that this request alone gets. When the client
    hangs up first, the request is cancelled (a waiting one is dropped unjudged) and counted.
    todo: /get_reward's round robin, to name an over-long pair by the request's queries."""
    judged = asyncio.ensure_future(request.app.state.batcher.submit(pairs))
    gone = asyncio.ensure_future(_hung_up(request))
    try:
        await asyncio.wait({judged, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        left = not judged.done()
        judged.cancel()                                 # no-op once done; else the batcher drops the job
    if left:
        metrics.abandoned.inc()
        return _error(499, "the client closed the connection before the answer")
    try:
        return judged.result()
    except QueueFull:
        return _error(503, f"queue full ({config.max_queue} requests waiting); retry later",
                      headers={"Retry-After": str(config.retry_after_s)})
    except PromptTooLong as e:
        return _too_long(e, todo)
    except BaerError as e:
        return _error(422, str(e))
    except (RuntimeError, MemoryError) as e:          # e.g. the device ran out of memory for this batch
        log.warning("judge failed on a request: %s", e)
        return _error(503, f"the engine could not judge this request now: {type(e).__name__}: {e}",
                      headers={"Retry-After": str(config.retry_after_s)})
    except Exception as e:                            # a bug: answered here, so the connection stays open
        log.error("judge raised on a request", exc_info=e)
        return _internal_error(e)


async def _hung_up(request: Request) -> None:
    """Returns when the client disconnects. The body was read already, so the server's receive()
    waits until the connection closes or the response is complete."""
    while (await request.receive())["type"] != "http.disconnect":
        await asyncio.sleep(0.05)                       # not expected after the body; never spin


async def _reward(request: Request, body: RewardRequest, config: ServeConfig, metrics):
    from baer_fast.integrations.trl import group_rewards, pair_texts, prompt_groups, round_robin

    if body.prompts is None:
        return _error(422, "prompts: required (each query's prompt, so that its completions can be compared)")
    if len(body.prompts) != len(body.query):
        return _error(422, f"prompts: {len(body.prompts)} prompts for {len(body.query)} queries")
    method = body.method or config.reward_method
    texts = [q[len(p):] if q.startswith(p) else q for q, p in zip(body.query, body.prompts)]
    gs = prompt_groups(body.prompts)
    todo = round_robin(gs, texts)
    if len(todo) > config.max_request_pairs:
        return _error(422, f"query: the completions make {len(todo)} pairs, more than {config.max_request_pairs}")
    pairs = list(zip(*pair_texts(body.prompts, texts, todo)))
    results = await _judged(request, pairs, config, metrics, todo=todo) if todo else []
    if not isinstance(results, list):
        return results
    p = [r["p_a"] for r in results]
    rewards = group_rewards(len(texts), gs, todo, p, method=method)
    scores = rewards if method == "mean_win" else group_rewards(len(texts), gs, todo, p, method="mean_win")
    return {"rewards": rewards, "scores": scores}


def _too_long(e: PromptTooLong, todo=None):
    """422 for an over-long pair (--no-truncate). `detail`, as a schema error's, says where it sits:
    loc ["pairs", k], the request's pair k, or on /get_reward ["query", i] and ["query", j] (round robin
    `todo`); its `msg` is the message without the pair named, for a client to name it in its own terms."""
    from baer_fast.integrations.trl import named_by_caller, pair_index
    k = pair_index(e)
    if k is None or (todo is not None and k >= len(todo)):
        return _error(422, str(e))
    locs = [["pairs", k]] if todo is None else [["query", i] for i in sorted(todo[k][1:])]
    msg = str(PromptTooLong(e.what, fix=e.fix, field=e.field))
    return _error(422, str(e if todo is None else named_by_caller(e, todo, "queries")),
                  detail=[{"loc": loc, "msg": msg, "type": "prompt_too_long"} for loc in locs])


def _error(status: int, message: str, *, headers: dict | None = None, detail=None):
    body = {"error": message} if detail is None else {"error": message, "detail": detail}
    return JSONResponse(body, status_code=status, headers=headers)


async def _invalid(request, exc):
    """400 for malformed or empty JSON, 415 for a body not sent as JSON, else 422 naming the first
    bad field as `pairs.0.question` (the input is not echoed)."""
    errors = [{"loc": _where(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")}
              for e in exc.errors()]
    first = errors[0] if errors else {"loc": [], "msg": "invalid request", "type": ""}
    where = ".".join(str(x) for x in first["loc"])
    if any(e["type"] == "json_invalid" for e in errors):
        why = next(e.get("ctx", {}).get("error") for e in exc.errors() if e.get("type") == "json_invalid")
        return _error(400, f"malformed JSON: {why or first['msg']}", detail=errors)
    ctype = request.headers.get("content-type", "")
    if first["loc"] == [] and "json" not in ctype:
        return _error(415, NOT_JSON.format(ctype))
    if first["loc"] == [] and first["type"] == "missing":
        return _error(400, "malformed JSON: the body is empty or null; send a JSON object", detail=errors)
    return _error(422, f"{where or 'body'}: {first['msg']}", detail=errors)


async def _internal(request, exc: Exception):
    """500 for an exception a route raised (a bug), in the same {"error"} shape, not the framework's
    text/plain; Starlette still raises it on, so the server logs the traceback (and drops the connection)."""
    return _internal_error(exc)


def _internal_error(exc: Exception):
    return _error(500, f"internal error: {type(exc).__name__}: {exc} (the traceback is in the server's log)")


def _where(loc) -> list:
    """A field's place in the JSON body: FastAPI's leading "body" dropped."""
    loc = list(loc)
    return loc[1:] if loc[:1] == ["body"] else loc


async def _http_error(request, exc: HTTPException):
    """Framework errors in the same {"error"} shape: 404, 405, and a body that could not be read
    (invalid UTF-8 is malformed JSON: 400)."""
    message = str(exc.detail)
    cause = exc.__cause__
    if exc.status_code == 400 and cause is not None:
        message = f"malformed JSON: {cause}"
    return _error(exc.status_code, message, headers=getattr(exc, "headers", None))
