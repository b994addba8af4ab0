"""Symmetric truncation: fit a pair into the judge's context without favouring either side.

Both responses are cut to the same token cap T (a response shorter than T keeps all of
itself), so (q, a, b) and (q, b, a) are cut identically and the swap invariant survives.
The question is capped at a quarter of the room. Text that is not valid UTF-8 (lone
surrogates) is replaced with U+FFFD first. Used by the in-process Judge, where every pair
must get a score; `baer-fast experts` refuses over-long pairs instead.
"""
from __future__ import annotations

from dataclasses import dataclass

CHARS_PER_TOKEN_MAX = 32   # pre-cut huge texts to 32 chars per token of room before tokenizing
SAFETY_TOKENS = 32         # re-tokenising a cut text can shift a few BPE merges at the boundary


@dataclass(frozen=True)
class Cut:
    question: str
    response_a: str
    response_b: str
    truncated: bool


def sanitize(text: str) -> str:
    """Replace anything that cannot be encoded as UTF-8 (lone surrogates) with U+FFFD."""
    return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace") if _has_surrogates(text) else text


def _has_surrogates(text: str) -> bool:
    try:
        text.encode("utf-8")
        return False
    except UnicodeEncodeError:
        return True


def shared_cap(len_a: int, len_b: int, room: int) -> int:
    """Largest T with min(len_a, T) + min(len_b, T) <= room; symmetric in (len_a, len_b)."""
    short = min(len_a, len_b)
    return room - short if 2 * short <= room else room // 2


def _head(tokenizer, text: str, n_tokens: int) -> tuple[str, int]:
    """First n_tokens of text (decoded) and the full token count of the pre-cut text."""
    pre = text[: CHARS_PER_TOKEN_MAX * max(n_tokens, 1)]
    ids = tokenizer(pre, add_special_tokens=False)["input_ids"]
    if len(ids) <= n_tokens and len(pre) == len(text):
        return text, len(ids)
    return tokenizer.decode(ids[:n_tokens]), len(ids)


def fit_pair(tokenizer, question: str, a: str, b: str, *, room: int) -> Cut:
    """Cut (question, a, b) so their tokens fit in `room` (context minus prompt overhead)."""
    question, a, b = sanitize(question), sanitize(a), sanitize(b)
    room = max(room - SAFETY_TOKENS, 3)
    q_text, n_q = _head(tokenizer, question, room)
    _, n_a = _head(tokenizer, a, room)
    _, n_b = _head(tokenizer, b, room)
    if n_q + n_a + n_b <= room and q_text == question:
        return Cut(question, a, b, False)
    q_cap = min(n_q, max(room // 4, room - n_a - n_b))
    q_text, _ = _head(tokenizer, question, q_cap)
    cap = shared_cap(n_a, n_b, room - q_cap)
    return Cut(q_text, _head(tokenizer, a, cap)[0], _head(tokenizer, b, cap)[0], True)
