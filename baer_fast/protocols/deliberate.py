"""Deliberate A versus B: a greedy deliberation per display order, then "[[" and a constrained
[[A]]/[[B]] verdict: the labels are the single tokens A and B read right after the "[[" cue.

runs = [u from order ab, u from order ba].
"""
from __future__ import annotations

from baer_fast.protocols.reasoning import continue_verdicts, order_runs, pairwise_generations

NAME = "deliberate"
LABELS = ("A", "B")
MAX_NEW_TOKENS = 512
TEMPERATURE, TOP_P, SAMPLES = 0.0, 1.0, 1
STOP = ("[[",)
INSTRUCTION = ("Deliberate carefully: state what an ideal answer needs, list the strengths and "
               "weaknesses of Response A and of Response B, and weigh them against each other. "
               "Then give your verdict strictly as [[A]] if Response A is better or [[B]] if "
               "Response B is better.")
CUE = "\n\nVerdict: [["


def generations(question: str, a: str, b: str):
    return pairwise_generations(question, a, b, INSTRUCTION, cue=CUE, labels=LABELS)


def verdicts(question: str, a: str, b: str, texts: dict):
    return continue_verdicts(CUE, LABELS)


def runs(lp: dict) -> list[float]:
    return order_runs(lp)
