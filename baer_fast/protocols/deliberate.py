"""Deliberate A versus B: a greedy deliberation per display order, then "[[" and a constrained
[[A]]/[[B]] verdict: the labels are the single tokens A and B read right after the "[[" cue.

runs = [u from order ab, u from order ba].
"""
from __future__ import annotations

from baer_fast.protocols.base import ORDERS
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


def native_runs(texts: dict, finish: dict, lp: dict) -> list:
    """deliberate_native: the protocol answers with "[[A]]"/"[[B]]"; its decoding stops at "[[", so
    a generation that reached "[[" (finish "stop") answers with the letter read there: the argmax
    of the constrained readout at the cue, 1 or 0 (no probability); one that ran out of budget or
    ended without "[[" has no verdict: None."""
    out = []
    for i, order in enumerate(ORDERS):
        if finish.get(order, [None])[0] != "stop":
            out.append(None)
            continue
        u = order_runs(lp)[i]
        out.append(1.0 if u > 0.5 else 0.0 if u < 0.5 else 0.5)
    return out
