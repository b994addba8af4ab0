"""Pointwise verification (routing only): each candidate judged alone, P(Y) over {Y, N}.

u = sigmoid(logit v(a) - logit v(b)) (paper Eq. 8), one run. The candidate-alone prompt is
the pairwise skeleton cut after the first response, so it shares its prefix with the order
in which that candidate is shown first; neither prompt sees the other candidate.
"""
from __future__ import annotations

from baer_fast.protocols.base import Prompt, question_segment, response_segment, sigmoid

NAME = "pointwise"
LABELS = ("Y", "N")
INSTRUCTION = ("Is Response A a correct and helpful answer to the question? "
               "Reply with a single letter: Y for yes or N for no.")


def prompts(question: str, a: str, b: str) -> list[Prompt]:
    return [Prompt(key, (question_segment(question), response_segment("A", text), INSTRUCTION), LABELS)
            for key, text in (("a", a), ("b", b))]


def runs(lp: dict) -> list[float]:
    # log-softmax over {Y, N}: logit P(Y) = lp[Y] - lp[N]
    va, vb = lp["a"][0] - lp["a"][1], lp["b"][0] - lp["b"][1]
    return [sigmoid(va - vb)]
