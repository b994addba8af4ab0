"""The shared prompt skeleton of every single-pass expert: pure text, no torch, no tokenizer.

A prompt is a system message plus a user message given as ordered segments: the shared
segments first (`[question][Response A][Response B]`), the protocol's instruction last, so
prompts of one pair share long prefixes. The runtime renders each prompt with the model's own
chat template and shares KV on the token ids, so the text here only has to keep shared
segments identical and first. A multi-turn question (a conversation of (role, content) turns)
sends its earlier turns as chat messages between the system and the user message, whose
question segment is the last user turn: the earlier turns are shared by every prompt of the pair.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

SYSTEM = ("You are a careful and impartial judge. You read a user's question and the responses "
          "written for it, and you judge their quality without regard to their order or length.")

ORDERS = ("ab", "ba")    # display orders: "ab" shows a as Response A; "ba" shows b as Response A


class QuestionSegment(str):
    """A question segment that also carries the conversation's earlier turns (`history`)."""
    history: tuple = ()


@dataclass(frozen=True)
class Prompt:
    key: str                      # unique within its expert, e.g. "ab" or "ba/B"
    segments: tuple[str, ...]     # user-message pieces, shared first, instruction last
    labels: tuple[str, ...]       # verdict labels, each a single token in the judge's tokenizer
    system: str = SYSTEM
    history: tuple = ()           # earlier (role, content) turns; default: the question segment's

    def __post_init__(self):
        if not self.history and self.segments and isinstance(self.segments[0], QuestionSegment):
            object.__setattr__(self, "history", self.segments[0].history)

    @property
    def user(self) -> str:
        return "".join(self.segments)

    def messages(self, *, fold_system: bool = False) -> list[dict]:
        """Chat messages: system, the conversation's earlier turns, the user message. fold_system
        puts the system text at the start of the first user message (templates that take no
        system role: Gemma, early Mistral)."""
        turns = [{"role": r, "content": c} for r, c in self.history] + [{"role": "user", "content": self.user}]
        if fold_system:
            turns[0] = {"role": "user", "content": f"{self.system}\n\n{turns[0]['content']}"}
            return turns
        return [{"role": "system", "content": self.system}] + turns


def conversation_parts(question) -> tuple[tuple, str]:
    """(earlier turns, last user turn) of a question: a string has no earlier turns."""
    if isinstance(question, str):
        return (), question
    turns = tuple((m["role"], m["content"]) if isinstance(m, dict) else tuple(m) for m in question)
    return turns[:-1], turns[-1][1]


def question_segment(question) -> str:
    history, last = conversation_parts(question)
    if not history:
        return f"Question:\n{last}\n\n"
    seg = QuestionSegment(f"Question (the user's last turn in the conversation above):\n{last}\n\n")
    seg.history = history
    return seg


def response_segment(tag: str, text: str) -> str:
    return f"Response {tag}:\n{text}\n\n"


def displayed(order: str, a: str, b: str) -> tuple[str, str]:
    """(first shown, second shown) for a display order."""
    return (a, b) if order == "ab" else (b, a)


def pairwise_segments(question: str, a: str, b: str, order: str, instruction: str) -> tuple[str, ...]:
    first, second = displayed(order, a, b)
    return (question_segment(question), response_segment("A", first), response_segment("B", second),
            instruction)


def sigmoid(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


GRID = float(1 << 53)


def snap(u):
    """u on the grid of multiples of 2^-53 (None stays None): there 1 - u is exact, so u -> 1 - u
    is an exact involution and the swap of a run set can be undone bit for bit. Below 1/2 this
    rounds by at most 2^-54; from 1/2 up every double is already on the grid."""
    return None if u is None else round(float(u) * GRID) / GRID


def prob(logprobs, i: int) -> float:
    """Probability of label i from constrained log-probabilities (already normalised)."""
    return math.exp(logprobs[i])
