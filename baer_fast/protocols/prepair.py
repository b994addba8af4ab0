"""PRePair (Jeong et al. 2025): an analysis of each candidate alone, then a pairwise verdict.

Each analysis sees the question and one response only (shown as "Response", never with a
position), so it depends on that candidate alone: two generations per pair ("a", "b"),
decoded once and reused by both display orders, where they are shown in display order next
to the responses. runs = [u from order ab, u from order ba].
"""
from __future__ import annotations

from baer_fast.protocols.base import ORDERS, Prompt, displayed, pairwise_segments, question_segment
from baer_fast.protocols.reasoning import Generation, order_runs

NAME = "prepair"
# its verdict prompts are the pairwise skeleton with a generated instruction: their
# [system][question][A][B] may come from the generation prompts' prefill (run_generative)
PAIRWISE_VERDICTS = True
LABELS = ("A", "B")
MAX_NEW_TOKENS = 256
TEMPERATURE, TOP_P, SAMPLES = 0.0, 1.0, 1
STOP = ()
ANALYSIS_INSTRUCTION = ("Analyse this response on its own: is it correct, helpful and complete? "
                        "List its strengths and weaknesses briefly. Do not give a score.")
VERDICT_INSTRUCTION = ("Analysis of Response A:\n{first}\n\nAnalysis of Response B:\n{second}\n\n"
                       "Considering the responses and their analyses, which response answers the "
                       "question better, Response A or Response B? Reply with a single letter: A or B.")


def _analysis_prompt(question: str, text: str, key: str) -> Prompt:
    return Prompt(key, (question_segment(question), f"Response:\n{text}\n\n", ANALYSIS_INSTRUCTION), ())


def generations(question: str, a: str, b: str):
    return [Generation("a", _analysis_prompt(question, a, "a")), Generation("b", _analysis_prompt(question, b, "b"))]


def verdicts(question: str, a: str, b: str, texts: dict):
    out = []
    for order in ORDERS:
        first, second = displayed(order, texts["a"][0].strip(), texts["b"][0].strip())
        instruction = VERDICT_INSTRUCTION.format(first=first, second=second)
        out.append(Prompt(order, pairwise_segments(question, a, b, order, instruction), LABELS))
    return out


def runs(lp: dict) -> list[float]:
    return order_runs(lp)
