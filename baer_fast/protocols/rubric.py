"""Rubric judging: a candidate-blind rubric written once per question (it sees neither
response), shared by both display orders, then a constrained A/B verdict against it.

The rubric sits in the instruction (last segment), so the verdict prompts keep the shared
[question][Response A][Response B] prefix. runs = [u from order ab, u from order ba].
"""
from __future__ import annotations

from baer_fast.protocols.base import ORDERS, Prompt, pairwise_segments, question_segment
from baer_fast.protocols.reasoning import Generation, order_runs

NAME = "rubric"
# its verdict prompts are the pairwise skeleton with a generated instruction: their
# [system][question][A][B] may come from the generation prompts' prefill (run_generative)
PAIRWISE_VERDICTS = True
LABELS = ("A", "B")
MAX_NEW_TOKENS = 256
TEMPERATURE, TOP_P, SAMPLES = 0.0, 1.0, 1
STOP = ()
RUBRIC_INSTRUCTION = ("Write a short grading rubric for answers to this question: the criteria a "
                      "correct, helpful and complete answer must meet, most important first. Do not "
                      "answer the question.")
VERDICT_INSTRUCTION = ("Rubric:\n{rubric}\n\nUsing the rubric above, which response answers the "
                       "question better, Response A or Response B? Reply with a single letter: A or B.")


def generations(question: str, a: str, b: str):
    return [Generation("rubric", Prompt("rubric", (question_segment(question), RUBRIC_INSTRUCTION), ()))]


def verdicts(question: str, a: str, b: str, texts: dict):
    instruction = VERDICT_INSTRUCTION.format(rubric=texts["rubric"][0].strip())
    return [Prompt(order, pairwise_segments(question, a, b, order, instruction), LABELS) for order in ORDERS]


def runs(lp: dict) -> list[float]:
    return order_runs(lp)
