"""Candidate-blind reference verification head (paper Eq. 9): s_ref(x) = logit v(a) - logit v(b).

The expert's run carries u = sigma(logit v(a) - logit v(b)) (a solution written without
seeing either candidate, then a Y/N check of each candidate alone); this head inverts the
sigmoid exactly (no EPS clip, unlike the stack's z), so s_ref is Eq. 9 to float64
resolution of the stored u. Odd by construction, bit for bit: the runs are put on the 2^-53
grid (where 1 - u is exact) and averaged in integers, so a swap (u -> 1 - u) negates the
centred mean p - 1/2 exactly, and s = log(1/2 + c) - log(1/2 - c) negates with it. Through
floats, p - 1/2 of a tiny u and of 1 - u round on different grids (5.6e-8 apart at u = 1e-9).
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Sequence

import numpy as np

from baer_fast.features.evidence import EPS

GRID = 2 ** 53          # runs as integers k = round(u * GRID): u -> 1 - u is k -> GRID - k, exact


def centred_mean(runs) -> float:
    """p - 1/2 of the mean of the decided runs (0 when none), correctly rounded from exact
    integers, so runs mapped u -> 1 - u give exactly the negated value."""
    ks = [round(float(u) * GRID) for u in (runs or ()) if u is not None]
    if not ks:
        return 0.0
    m = len(ks)
    return float(Fraction(2 * sum(ks) - m * GRID, 2 * m * GRID))


@dataclass
class ReferenceHead:
    expert: str          # name of the reference-verification expert in the signals
    eps: float = EPS
    kind: str = "reference"

    @property
    def experts(self) -> list[str]:
        return [self.expert]

    def score(self, records: Sequence) -> np.ndarray:
        half = np.nextafter(0.5, 0.0)           # p in {0, 1}: the nearest float inside, still odd
        c = np.clip([centred_mean(r.experts.get(self.expert)) for r in records], -half, half)
        return np.log(0.5 + c) - np.log(0.5 - c)

    def to_json(self) -> dict:
        return {"kind": self.kind, "expert": self.expert, "eps": self.eps}

    @classmethod
    def from_json(cls, d: dict) -> "ReferenceHead":
        return cls(str(d["expert"]), float(d["eps"]))
