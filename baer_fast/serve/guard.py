"""ASGI middleware in front of the routes: bearer-token auth, the body size and time limits, and
the latency/status metrics of every answer. Pure ASGI, so an over-long body is refused before
the framework parses anything, and a body that stalls or trickles is cut off (408) rather than
holding its connection and the server's memory for it forever (uvicorn has no such timeout)."""
from __future__ import annotations

import asyncio
import json
import secrets
import time

_GONE = object()
OPEN_PATHS = ("/health",)                  # answered without a token
JUDGED = ("/v1/judge", "/get_reward")       # counted in flight
ROUTES = JUDGED + ("/health", "/metrics")
NOT_JSON = "send the body as JSON with 'Content-Type: application/json' (got {!r})"


async def send_json(send, status: int, body: dict, *, headers: dict | None = None) -> None:
    data = json.dumps(body).encode("utf-8")
    extra = [(k.lower().encode("latin-1"), str(v).encode("latin-1")) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()),
                            *extra]})
    await send({"type": "http.response.body", "body": data})


def _header(scope, name: bytes) -> bytes | None:
    for k, v in scope.get("headers", ()):
        if k.lower() == name:
            return v
    return None


class Guard:
    """Auth (constant-time compare), then the body limits (413 size, 408 time), then the app with the
    body replayed."""

    def __init__(self, app, *, api_key: str | None, max_body_bytes: int, body_timeout_s: float = 60.0,
                 metrics=None):
        self.app, self.limit, self.timeout, self.metrics = app, max_body_bytes, body_timeout_s, metrics
        self.key = api_key.encode("utf-8") if api_key else None

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        if self.key is not None and scope["path"] not in OPEN_PATHS and not self._authorized(scope):
            return await send_json(send, 401, {"error": "missing or wrong bearer token (Authorization: Bearer ...)"},
                                   headers={"WWW-Authenticate": "Bearer"})
        length = _header(scope, b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.limit):
            if not length.isdigit():
                return await send_json(send, 400, {"error": "malformed Content-Length header"})
            return await self._too_large(send)
        try:
            body = await asyncio.wait_for(self._read(receive), self.timeout)
        except asyncio.TimeoutError:
            return await self._too_slow(send)
        if body is _GONE:
            return None                     # the client left before sending its body
        if body is None:
            return await self._too_large(send)
        if scope.get("method") == "POST" and scope["path"] in JUDGED and _header(scope, b"content-type") is None:
            # FastAPI >= 0.132 (strict_content_type) leaves such a body unparsed, which app._invalid
            # answers 415; older FastAPI reads it as JSON. Refused here, the answer is the same on both.
            return await send_json(send, 415, {"error": NOT_JSON.format("")})
        return await self.app(scope, _replay(body, receive), send)

    def _authorized(self, scope) -> bool:
        given = _header(scope, b"authorization") or b""
        scheme, _, token = given.partition(b" ")
        return scheme.lower() == b"bearer" and secrets.compare_digest(token.strip(), self.key)

    async def _read(self, receive) -> bytes | None:
        chunks, size, more = [], 0, True
        while more:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                return _GONE
            chunk = msg.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                return None
            chunks.append(chunk)
            more = msg.get("more_body", False)
        return b"".join(chunks)

    async def _too_large(self, send):
        await send_json(send, 413, {"error": f"request body larger than {self.limit} bytes"})

    async def _too_slow(self, send):
        """408, and the connection closed: the rest of the body is never read."""
        if self.metrics is not None:
            self.metrics.body_timeouts.inc()
        await send_json(send, 408, {"error": f"the request body did not arrive within {self.timeout:g} s of its "
                                             "headers (--body-timeout-s)"}, headers={"Connection": "close"})


def _replay(body: bytes, receive):
    sent = False

    async def replay():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()
    return replay


class Observe:
    """Counts every answer by endpoint and status and times it (arrival to last byte). A request
    the app left unanswered without an error (its client hung up, e.g. mid-body) counts as 499."""

    def __init__(self, app, metrics):
        self.app, self.metrics = app, metrics

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        t0, status = time.perf_counter(), [None]

        async def watched(msg):
            if msg["type"] == "http.response.start":
                status[0] = msg["status"]
            await send(msg)
        judged = scope["path"] in JUDGED
        self.metrics.taken(judged)
        try:
            await self.app(scope, receive, watched)
        except BaseException:
            status[0] = status[0] or 500
            raise
        finally:
            self.metrics.taken(-judged)
            path = scope["path"] if scope["path"] in ROUTES else "other"
            self.metrics.answered(path, status[0] or 499, time.perf_counter() - t0)
