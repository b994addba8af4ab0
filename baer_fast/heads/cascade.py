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


@dataclass
class CascadeHead:
    stage1: object            # a StackHead over the cheap experts
    full: object              # the deployed full head (any kind)
    tau: float
    kind: str = "cascade"

    def exits(self, records: Sequence) -> np.ndarray:
        """[N] bool: the cheap stage decides (needs only the stage-1 experts' runs)."""
        s1 = np.asarray(self.stage1.score(records), dtype=np.float64)
        return np.round(np.abs(s1), ROUND_DIGITS) >= self.tau

    def score(self, records: Sequence) -> np.ndarray:
        s = np.asarray(self.stage1.score(records), dtype=np.float64)
        rest = ~(np.round(np.abs(s), ROUND_DIGITS) >= self.tau)
        if rest.any():
            s[rest] = self.full.score([r for r, m in zip(records, rest) if m])
        return s
