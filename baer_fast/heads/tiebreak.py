"""Exact ties broken by the candidates, not by their positions (docs/selection.md, "Ties").

A pair on which every expert's evidence cancels is a fixed point of the swap: any antisymmetric
head scores it 0, and Eq. 1 (a when s >= 0) names whichever response is shown first. The
tie-break replaces a tied score (round(|s|, 9) == 0, the cascade's rounding) by
w * sign(len_a - len_b), w = logit((right + 1) / (right + wrong + 2)) over the training rows whose
lengths differ (right: the longer response won), applied only when |right - wrong| >
sqrt(right + wrong) (one standard error of a fair coin); otherwise w = 0 and ties stay 0.
|s| rounds the same in both orientations and sign(len_a - len_b) flips, so a broken tie is
negated exactly under the swap. Labels are read only by `fit_tiebreak`, on `fit`'s rows.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from baer_fast.heads.cascade import strength

FEATURE = "sign(len_a - len_b)"


def length_sign(records: Sequence) -> np.ndarray:
    """[N] sign of the character-length difference of the two responses (0: equal or unknown)."""
    out = np.zeros(len(records))
    for i, r in enumerate(records):
        a, b = r.meta.get("len_a"), r.meta.get("len_b")
        if isinstance(a, (int, float)) and isinstance(b, (int, float)):
            out[i] = float(np.sign(a - b))
    return out


def fit_tiebreak(rows: Sequence, y: np.ndarray, z_min: float = 1.0) -> dict:
    """Labelled training rows, y in {+1, -1} -> the artifact's `tiebreak` record (weight 0: not applied)."""
    d = length_sign(rows)
    right, wrong = int(np.sum(d * y > 0)), int(np.sum(d * y < 0))
    z = (right - wrong) / math.sqrt(right + wrong) if right + wrong else 0.0
    applied = abs(z) > z_min
    weight = math.log((right + 1) / (wrong + 1)) if applied else 0.0
    return {"feature": FEATURE, "weight": weight, "applied": applied, "right": right, "wrong": wrong,
            "z": z, "z_min": z_min,
            "rule": "a score with round(|s|, 9) == 0 becomes weight * sign(len_a - len_b); weight = logit of the "
                    "Laplace-smoothed share of length-differing training rows won by the longer response, applied "
                    "only if |right - wrong| > z_min * sqrt(right + wrong)"}


def describe(tb: dict) -> str:
    """One line for `fit`'s report."""
    n = tb["right"] + tb["wrong"]
    side = "longer" if tb["right"] >= tb["wrong"] else "shorter"
    won = max(tb["right"], tb["wrong"])
    if tb["applied"]:
        return (f"tie-break: exact ties go to the {side} response (it wins {won} of {n} length-differing training "
                f"rows, z = {tb['z']:+.1f}; weight {tb['weight']:+.3f})")
    return (f"tie-break: none (the {side} response wins {won} of {n} length-differing training rows, "
            f"|z| = {abs(tb['z']):.1f} <= {tb['z_min']:g}); exact ties stay 0")


@dataclass
class TieBreakHead:
    inner: object                 # the deployed head (any kind, a cascade included)
    weight: float
    kind: str = "tiebreak"

    def ties(self, s: np.ndarray) -> np.ndarray:
        return strength(s) == 0

    def score(self, records: Sequence) -> np.ndarray:
        s = np.array(self.inner.score(records), dtype=np.float64)
        tie = self.ties(s)
        if self.weight and tie.any():
            d = length_sign([r for r, t in zip(records, tie) if t])
            s[tie] = np.where(d != 0, self.weight * d, s[tie])
        return s

    def __getattr__(self, name: str):
        """Everything else is the inner head's (the router's `chosen_experts`, the cascade's `exits`)."""
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)
