"""Self-consistency: five sampled reasonings per display order, each read as its own run.

Every sample continues from the prompt's one prefill (shared KV). runs are interleaved
[s0 ab, s0 ba, s1 ab, s1 ba, ...], so `Signals.swapped` (which exchanges consecutive
(ab, ba) pairs) mirrors them: the runtime seeds a sample from the displayed prompt text, so
the swapped pair's order-ba sample k is the original's order-ab sample k.
"""
from __future__ import annotations

from baer_fast.protocols.base import prob
from baer_fast.protocols.reasoning import continue_verdicts, native_order_runs, pairwise_generations

NAME = "self_consistency"
LABELS = ("A", "B")
MAX_NEW_TOKENS = 512
TEMPERATURE, TOP_P, SAMPLES = 0.7, 0.95, 5
STOP = ()
INSTRUCTION = ("Reason step by step about which response answers the question better, weighing "
               "correctness, helpfulness and completeness. End with 'Final verdict:' followed by A or B.")
CUE = "\n\nFinal verdict:\n"


def generations(question: str, a: str, b: str):
    return pairwise_generations(question, a, b, INSTRUCTION, samples=SAMPLES, cue=CUE, labels=LABELS)


def verdicts(question: str, a: str, b: str, texts: dict):
    return continue_verdicts(CUE, LABELS, SAMPLES)


def runs(lp: dict) -> list[float]:
    out = []
    for s in range(SAMPLES):
        out += [prob(lp[f"ab/{s}"], 0), prob(lp[f"ba/{s}"], 1)]
    return out


def native_runs(texts: dict, finish: dict, lp: dict) -> list:
    """self_consistency_native: the verdict written after 'Final verdict:' in each order's text (majority
    over samples), None where none is written; no readout."""
    return native_order_runs(texts)
