"""Two-stage head (early exit): a cheap stack first; pairs it is not sure of go to the full head.

exit(x) <=> round(|s1(x)|, ROUND_DIGITS) >= tau. s1 is odd (s1(Tx) = -s1(x) to rounding),
so |s1| and the exit decision are unchanged when the candidates are swapped (the rounding
absorbs the last-bit differences of u -> 1 - u); each branch is antisymmetric, so the
cascade is too. Fitting tau lives in `selection/cascade.py`; this is scoring only.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

ROUND_DIGITS = 9


def strength(s) -> np.ndarray:
    """|s| rounded to ROUND_DIGITS: the same in both orientations of a pair (the swap's last-bit
    differences are absorbed), so decisions on it (exit, tie) are swap-invariant."""
    return np.round(np.abs(np.asarray(s, dtype=np.float64)), ROUND_DIGITS)


@dataclass
class CascadeHead:
    stage1: object            # a StackHead over the cheap experts
    full: object              # the deployed full head (any kind)
    tau: float
    kind: str = "cascade"

    def exits(self, records: Sequence) -> np.ndarray:
        """[N] bool: the cheap stage decides (needs only the stage-1 experts' runs)."""
        return strength(self.stage1.score(records)) >= self.tau

    def score(self, records: Sequence) -> np.ndarray:
        s = np.asarray(self.stage1.score(records), dtype=np.float64)
        rest = ~(strength(s) >= self.tau)
        if rest.any():
            s[rest] = self.full.score([r for r, m in zip(records, rest) if m])
        return s
