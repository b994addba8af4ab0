"""Candidate-blind reference verification (paper Eq. 9): solve the question without seeing
either candidate (greedy, 4096-token budget by default), then check each candidate alone
against that solution with a constrained Y/N readout.

u = sigmoid(logit v(a) - logit v(b)), v(c) = P(Y | question, reference, c) over {Y, N}; one
run, stored as [u] (an odd-length run list, which `Signals.swapped` maps to [1 - u]). The
solution is one generation per pair (per question within a call); both checks share its prefix. The reference head
(`heads/reference.py`) reads this expert, named `reference`, as z = logit(u).
"""
from __future__ import annotations

from baer_fast.protocols.base import Prompt, question_segment, sigmoid
from baer_fast.protocols.reasoning import Generation

NAME = "reference"
LABELS = ("Y", "N")
MAX_NEW_TOKENS = 4096
TEMPERATURE, TOP_P, SAMPLES = 0.0, 1.0, 1
STOP = ()
SOLVE_INSTRUCTION = "Solve this carefully and give a complete, correct answer."
CHECK_INSTRUCTION = ("Using the reference solution, is the response a correct and helpful answer to the "
                     "question? Reply with a single letter: Y for yes or N for no.")


def generations(question: str, a: str, b: str):
    return [Generation("solution", Prompt("solution", (question_segment(question), SOLVE_INSTRUCTION), ()))]


def verdicts(question: str, a: str, b: str, texts: dict):
    ref = f"Reference solution:\n{texts['solution'][0].strip()}\n\n"
    return [Prompt(key, (question_segment(question), ref, f"Response:\n{text}\n\n", CHECK_INSTRUCTION), LABELS)
            for key, text in (("a", a), ("b", b))]


def runs(lp: dict) -> list[float]:
    va, vb = lp["a"][0] - lp["a"][1], lp["b"][0] - lp["b"][1]
    return [sigmoid(va - vb)]
