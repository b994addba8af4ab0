"""What generative experts declare: generation prompts, then verdict readouts. Pure text, no torch.

A generative expert exposes `NAME`, `LABELS`, `MAX_NEW_TOKENS` (default budget),
`TEMPERATURE`/`TOP_P` (0 = greedy), `SAMPLES`, `STOP` and three functions:

    generations(question, a, b) -> list[Generation]      # stage 1: what to decode
    verdicts(question, a, b, texts) -> list[Verdict]     # stage 2: what to read
    runs(logprobs_by_key) -> list[u]                     # canonical runs, like single-pass experts

`texts[gen_key]`: the decoded sample texts of that generation. A Verdict continues a generation
(prompt ids, generated ids, cue ids) or is a fresh Prompt embedding generated texts; a
Generation declaring its Continue verdicts' cue and labels is read by the decoder as each row
finishes. Generations that depend on one candidate or none are decoded once per pair and reused
by both display orders (and once per call for pairs that share them: bank/generative._distinct).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from baer_fast.protocols.base import ORDERS, Prompt, pairwise_segments, prob


@dataclass(frozen=True)
class Generation:
    key: str                  # unique within its expert, e.g. "ab", "a", "solution"
    prompt: Prompt            # rendered with the chat template; decoding starts the assistant turn
    samples: int = 1
    cue: str = ""             # when a Continue verdict follows: its cue and labels, so the runtime
    labels: tuple[str, ...] = ()   # may read the verdict right at the end of decoding


@dataclass(frozen=True)
class Continue:
    key: str                  # readout key, e.g. "ab" or "ab/3"
    gen: str                  # the Generation it continues
    sample: int               # which sample of it
    cue: str                  # appended after the generated text; the verdict is read after it
    labels: tuple[str, ...]


def pairwise_generations(question: str, a: str, b: str, instruction: str, *, samples: int = 1, cue: str = "",
                         labels: tuple[str, ...] = ()) -> list[Generation]:
    """One reasoning prompt per display order, on the shared pairwise skeleton."""
    return [Generation(order, Prompt(order, pairwise_segments(question, a, b, order, instruction), ()), samples,
                       cue, labels) for order in ORDERS]


def continue_verdicts(cue: str, labels: tuple[str, ...], samples: int | None = None) -> list[Continue]:
    """A verdict after each order's reasoning (`pairwise_generations`), keyed "ab"/"ba"; with
    `samples`, one after every sample, keyed "ab/s"/"ba/s" and interleaved [s0 ab, s0 ba, s1 ab, ...]."""
    if samples is None:
        return [Continue(order, order, 0, cue, labels) for order in ORDERS]
    return [Continue(f"{order}/{s}", order, s, cue, labels) for s in range(samples) for order in ORDERS]


def order_runs(lp: dict, suffix: str = "") -> list[float]:
    """[u from order ab, u from order ba] for labels (A, B): in order ba, a is shown as B."""
    return [prob(lp["ab" + suffix], 0), prob(lp["ba" + suffix], 1)]


# ---------------------------------------------------------------- native verdicts
# The protocol's own procedure: the verdict its instruction asks the model to *write*, parsed
# from the generated text (no readout), None when the text has none. Runs stay canonical.

FINAL_VERDICT = re.compile(r"(?i:final\s+verdict)\s*[:\-]?\s*[*\"'(\[]*\s*(?:(?i:response)\s+)?([AB])(?![A-Za-z0-9])")


def parse_final_verdict(text: str) -> str | None:
    """The letter after the last 'Final verdict:' (markup such as ** or [ tolerated), else None."""
    found = FINAL_VERDICT.findall(text)
    return found[-1] if found else None


def letter_u(letter: str | None, order: str) -> float | None:
    """u (P(a better), 0 or 1) of a written verdict letter in a display order."""
    if letter is None:
        return None
    return float((letter == "A") == (order == "ab"))


def vote(us: list) -> float | None:
    """Majority over the parsed verdicts (None skipped): 1, 0, 1/2 for a tie, None if none parsed."""
    seen = [u for u in us if u is not None]
    if not seen:
        return None
    wins = sum(seen)
    return 1.0 if 2 * wins > len(seen) else 0.0 if 2 * wins < len(seen) else 0.5


def native_order_runs(texts: dict, parse=parse_final_verdict) -> list:
    """[u_ab, u_ba] from each order's one written verdict (cot); majority over samples (self_consistency)."""
    return [vote([letter_u(parse(t), order) for t in texts.get(order, [])]) for order in ORDERS]
