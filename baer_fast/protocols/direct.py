"""Direct bidirectional judging: P(A) over {A, B} at the verdict position, in both orders.

runs = [P(a better | order ab), P(a better | order ba)]: in order ba, a is shown second, so
its probability is P(label B).
"""
from __future__ import annotations

from baer_fast.protocols.base import ORDERS, Prompt, pairwise_segments, prob

NAME = "direct"
LABELS = ("A", "B")
INSTRUCTION = ("Which response answers the question better, Response A or Response B? "
               "Reply with a single letter: A or B.")


def prompts(question: str, a: str, b: str) -> list[Prompt]:
    return [Prompt(order, pairwise_segments(question, a, b, order, INSTRUCTION), LABELS) for order in ORDERS]


def runs(lp: dict) -> list[float]:
    """lp: prompt key -> log-probabilities over LABELS."""
    return [prob(lp["ab"], 0), prob(lp["ba"], 1)]
