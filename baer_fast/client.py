"""HTTP client of `baer-fast serve` (httpx): the Judge's interface over the network.

    client = JudgeClient("http://127.0.0.1:8000", api_key=os.environ.get("BAER_API_KEY"))
    s = client.score(questions, responses_a, responses_b)          # np.float64 [N]
    s = await client.ascore(questions, responses_a, responses_b)   # the same, async

`score`/`prob_a` mirror `Judge` (`subsets=`, `categories=` included), so the TRL adapters take a
client in place of a Judge; `results` gives the server's records. Inputs are checked as Judge checks
them (`api.batch_inputs`, before any request); a conversation question is sent as its message list,
and a call of more pairs than one request may hold (`max_pairs`) is sent as several. A 503 (queue
full) is retried after its Retry-After, a connection refused or dropped before an answer every
second; after `retries` tries, and for any other error, `JudgeServerError` with the server's message
(an over-long pair, serve --no-truncate, named by its index in the call: `.pair`). A timeout is never
re-sent (the server may still be judging): `JudgeServerTimeout`.
"""
from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Sequence

import numpy as np


MAX_PAIRS = 4096        # pairs per request: the server's default max_request_pairs (serve/config.py)


class JudgeServerError(RuntimeError):
    def __init__(self, status: int, message: str, *, pair: int | None = None, reason: str | None = None):
        super().__init__(f"judge server answered {status}: {message}" if status else message)
        self.status = status        # the HTTP status; 0: no answer (unreachable, or the timeout passed)
        self.message = message      # the server's own words (its "error")
        self.pair = pair            # the over-long pair's index in the call (a 422 under --no-truncate)
        self.reason = reason        # what is wrong with it, without the pair named

    def named(self, where: str) -> "JudgeServerError":
        """The same error naming its pair as `where` ("of completions 3 and 4 (0-based)")."""
        if self.reason is None:
            return self
        return type(self)(self.status, f"pair {where}: {self.reason}", pair=self.pair, reason=self.reason)


class JudgeServerTimeout(JudgeServerError):
    """The server took the request but sent no answer within `timeout`: a slow judge, not a lost one."""


class JudgeClient:
    def __init__(self, url: str, api_key: str | None = None, *, timeout: float = 600.0, retries: int = 10,
                 max_pairs: int = MAX_PAIRS):
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ValueError(f"retries must be an integer of at least 0 (tries after the first), got {retries!r}")
        if isinstance(timeout, bool) or (isinstance(timeout, (int, float)) and not timeout > 0):
            raise ValueError(f"timeout must be seconds above 0 (None: no limit; or an httpx.Timeout), got {timeout!r}")
        if isinstance(max_pairs, bool) or not isinstance(max_pairs, int) or max_pairs < 1:
            raise ValueError(f"max_pairs must be an integer of at least 1 (pairs per request), got {max_pairs!r}")
        self.url, self.timeout, self.retries, self.max_pairs = url.rstrip("/"), timeout, retries, max_pairs
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._sync = None
        self._async: dict = {}          # event loop -> httpx.AsyncClient (a client is bound to its loop)

    # ------------------------------------------------------------------ sync

    def results(self, questions: Sequence[str], responses_a: Sequence[str], responses_b: Sequence[str], *,
                subsets=None, categories=None) -> list[dict]:
        body = _pairs_body(questions, responses_a, responses_b, subsets, categories)
        out = []
        for start, part in self._parts(body):
            with _placed(start, part, len(body["pairs"])):
                out += self.post("/v1/judge", part)["results"]
        return out

    def _parts(self, body: dict) -> list[tuple[int, dict]]:
        """(first pair's index, request) of the body sent as requests of at most max_pairs pairs, in order."""
        pairs = body["pairs"]
        return [(k, {"pairs": pairs[k:k + self.max_pairs]}) for k in range(0, len(pairs), self.max_pairs)] or [(0, body)]

    def score(self, questions, responses_a, responses_b, *, subsets=None, categories=None) -> np.ndarray:
        return _field(self.results(questions, responses_a, responses_b, subsets=subsets, categories=categories),
                      "score")

    def prob_a(self, questions, responses_a, responses_b, *, subsets=None, categories=None) -> np.ndarray:
        return _field(self.results(questions, responses_a, responses_b, subsets=subsets, categories=categories),
                      "p_a")

    def post(self, path: str, body: dict) -> dict:
        import httpx
        if self._sync is None:
            self._sync = httpx.Client(timeout=self.timeout, headers=self.headers)
        for attempt in range(self.retries + 1):
            try:
                r = self._sync.post(self.url + path, json=body)
            except httpx.TransportError as e:
                self._give_up(e, attempt)
                time.sleep(1.0)
                continue
            if r.status_code != 503 or attempt == self.retries:
                return _checked(r)
            time.sleep(_retry_after(r))
        raise AssertionError("unreachable")

    # ------------------------------------------------------------------ async

    async def aresults(self, questions, responses_a, responses_b, *, subsets=None, categories=None) -> list[dict]:
        body = _pairs_body(questions, responses_a, responses_b, subsets, categories)
        out = []
        for start, part in self._parts(body):
            with _placed(start, part, len(body["pairs"])):
                out += (await self.apost("/v1/judge", part))["results"]
        return out

    async def ascore(self, questions, responses_a, responses_b, *, subsets=None, categories=None) -> np.ndarray:
        return _field(await self.aresults(questions, responses_a, responses_b, subsets=subsets, categories=categories),
                      "score")

    async def aprob_a(self, questions, responses_a, responses_b, *, subsets=None, categories=None) -> np.ndarray:
        return _field(await self.aresults(questions, responses_a, responses_b, subsets=subsets, categories=categories),
                      "p_a")

    async def apost(self, path: str, body: dict) -> dict:
        import httpx
        loop = asyncio.get_running_loop()
        client = self._async.get(loop)
        if client is None:
            client = self._async[loop] = httpx.AsyncClient(timeout=self.timeout, headers=self.headers)
        for attempt in range(self.retries + 1):
            try:
                r = await client.post(self.url + path, json=body)
            except httpx.TransportError as e:
                self._give_up(e, attempt)
                await asyncio.sleep(1.0)
                continue
            if r.status_code != 503 or attempt == self.retries:
                return _checked(r)
            await asyncio.sleep(_retry_after(r))
        raise AssertionError("unreachable")

    def _give_up(self, e, attempt: int) -> None:
        """Raise for transport error `e`, unless it is a connection that failed before the server answered
        (refused, dropped: a restarting server) and tries are left. A timeout is not re-sent: the server
        may still be judging the pairs, and a second request would judge them again."""
        import httpx
        if isinstance(e, httpx.TimeoutException) and not isinstance(e, httpx.ConnectTimeout):
            raise JudgeServerTimeout(0, f"judge server at {self.url} sent no answer within timeout={self.timeout} s "
                                        f"({type(e).__name__}; not re-sent, the server may still be judging it): "
                                        "for large calls or a slow judge raise JudgeClient(timeout=...) "
                                        "(remote_reward(timeout=...))") from None
        if not isinstance(e, (httpx.NetworkError, httpx.RemoteProtocolError, httpx.ConnectTimeout)):
            raise JudgeServerError(0, f"request to {self.url} failed: {type(e).__name__}: {e}") from None
        if attempt == self.retries:
            raise JudgeServerError(0, f"cannot reach {self.url} after {self.retries} retries, one a second "
                                      f"({type(e).__name__}: {e}): is `baer-fast serve` running there? raise "
                                      "retries= to wait out a longer restart") from None

    def close(self) -> None:
        if self._sync is not None:
            self._sync.close()
            self._sync = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _pairs_body(questions, responses_a, responses_b, subsets=None, categories=None) -> dict:
    """The /v1/judge body; `subset` / `category` (Judge's subsets= / categories=) only where given."""
    from baer_fast.api import batch_inputs
    from baer_fast.io.records import per_pair

    questions, responses_a, responses_b = batch_inputs(questions, responses_a, responses_b)
    extra = list(zip(per_pair(subsets, len(questions), "subsets", None),
                     per_pair(categories, len(questions), "categories", None)))
    pairs = []
    for (q, a, b), (sub, cat) in zip(zip(questions, responses_a, responses_b), extra):
        question = q if isinstance(q, str) else [{"role": r, "content": c} for r, c in q]
        pair = {"question": question, "response_a": a, "response_b": b}
        pair.update({k: v for k, v in (("subset", sub), ("category", cat)) if v is not None})
        pairs.append(pair)
    return {"pairs": pairs}


@contextlib.contextmanager
def _placed(start: int, part: dict, total: int):
    """A server error on one request of a call sent as several says where that request sits in the
    call: the server counts pairs from the request's first. A pair it names as data (`pair`) is
    renamed by its place in the call (the server's pair 3 is the call's start + 3)."""
    try:
        yield
    except JudgeServerError as e:
        if e.pair is not None:
            raise JudgeServerError(e.status, e.message, pair=start + e.pair, reason=e.reason).named(
                f"{start + e.pair} (0-based) of the call") from None
        if e.status == 0 or len(part["pairs"]) == total:
            raise
        end = start + len(part["pairs"]) - 1
        raise JudgeServerError(e.status, f"{e.message} [the request of pairs {start}..{end} (0-based) of the call, "
                                         "counted from its first]") from None


def _field(results: list[dict], key: str) -> np.ndarray:
    return np.asarray([r[key] for r in results], dtype=np.float64)


def _retry_after(r) -> float:
    try:
        return min(max(float(r.headers.get("retry-after", "1")), 0.05), 60.0)
    except ValueError:
        return 1.0


def _checked(r) -> dict:
    if r.status_code == 200:
        return r.json()
    try:
        body = r.json()
        message, detail = body.get("error", r.text), body.get("detail")
    except (ValueError, AttributeError):
        message, detail = r.text, None
    raise JudgeServerError(r.status_code, str(message)[:2000], **_named_pair(detail))


def _named_pair(detail) -> dict:
    """{pair, reason} of a 422 whose detail names one pair of the request (loc ["pairs", k], an
    over-long pair under --no-truncate), else {}: then the client can name it in the caller's terms."""
    if not isinstance(detail, list) or len(detail) != 1 or not isinstance(detail[0], dict):
        return {}
    loc, msg = detail[0].get("loc"), detail[0].get("msg")
    if detail[0].get("type") != "prompt_too_long" or not isinstance(msg, str) or not isinstance(loc, list) \
            or len(loc) != 2 or loc[0] != "pairs" or not isinstance(loc[1], int) or isinstance(loc[1], bool):
        return {}
    return {"pair": loc[1], "reason": msg}
