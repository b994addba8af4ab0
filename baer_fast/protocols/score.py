"""Score-then-choose: each answer rated on its own 1-9 scale, then the better score wins.

In each display order both responses are shown (the shared prefix) and two suffixes ask for
the rating of Response A and of Response B alone. The expected score comes from the
constrained distribution over the nine labels; u = sigmoid(E[s_a] - E[s_b]) per order.
The labels 1..9 are single digits, hence single tokens even in digit-splitting tokenizers
(Qwen's), which "10" is not.

runs = [u from order ab, u from order ba].
"""
from __future__ import annotations

import math

from baer_fast.protocols.base import ORDERS, Prompt, pairwise_segments, sigmoid

NAME = "score"
LABELS = tuple(str(k) for k in range(1, 10))
INSTRUCTION = ("Rate Response {tag} alone on a scale from 1 to 9, where 1 means very poor and 9 means "
               "excellent. Reply with a single digit.")


def prompts(question: str, a: str, b: str) -> list[Prompt]:
    return [Prompt(f"{order}/{tag}", pairwise_segments(question, a, b, order, INSTRUCTION.format(tag=tag)),
                   LABELS)
            for order in ORDERS for tag in ("A", "B")]


def expected_score(logprobs) -> float:
    return sum(math.exp(lp) * (k + 1) for k, lp in enumerate(logprobs))


def runs(lp: dict) -> list[float]:
    e = {key: expected_score(v) for key, v in lp.items()}
    # order ab shows a as A; order ba shows a as B
    return [sigmoid(e["ab/A"] - e["ab/B"]), sigmoid(e["ba/B"] - e["ba/A"])]
