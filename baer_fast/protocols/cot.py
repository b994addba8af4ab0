"""Chain-of-thought: one greedy reasoning per display order, then a constrained A/B verdict.

runs = [u from order ab, u from order ba].
"""
from __future__ import annotations

from baer_fast.protocols.reasoning import continue_verdicts, native_order_runs, order_runs, pairwise_generations

NAME = "cot"
LABELS = ("A", "B")
MAX_NEW_TOKENS = 512
TEMPERATURE, TOP_P, SAMPLES = 0.0, 1.0, 1
STOP = ()
INSTRUCTION = ("Compare the two responses step by step: check each for correctness, helpfulness and "
               "completeness, then decide which answers the question better. Think before you answer, "
               "and end with 'Final verdict:' followed by A or B.")
CUE = "\n\nFinal verdict:\n"


def generations(question: str, a: str, b: str):
    return pairwise_generations(question, a, b, INSTRUCTION, cue=CUE, labels=LABELS)


def verdicts(question: str, a: str, b: str, texts: dict):
    return continue_verdicts(CUE, LABELS)


def runs(lp: dict) -> list[float]:
    return order_runs(lp)


def native_runs(texts: dict, finish: dict, lp: dict) -> list:
    """cot_native: the verdict written after 'Final verdict:' in each order's text (majority
    over samples), None where none is written; no readout."""
    return native_order_runs(texts)
