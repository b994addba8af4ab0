"""Candidate-blind reference verification head (paper Eq. 9): s_ref(x) = logit v(a) - logit v(b).

The expert's run carries u = sigma(logit v(a) - logit v(b)) (a solution written without
seeing either candidate, then a Y/N check of each candidate alone); this head inverts the
sigmoid exactly (no EPS clip, unlike the stack's z), so s_ref is Eq. 9 to float64
resolution of the stored u. Odd by construction: a swap maps u -> 1 - u, hence s -> -s.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from baer_fast.features.evidence import EPS, evidence, logit_unclipped, runs_tensor


@dataclass
class ReferenceHead:
    expert: str          # name of the reference-verification expert in the signals
    eps: float = EPS
    kind: str = "reference"

    @property
    def experts(self) -> list[str]:
        return [self.expert]

    def score(self, records: Sequence) -> np.ndarray:
        p, _, _, _ = evidence(runs_tensor(records, [self.expert]), self.eps)
        return logit_unclipped(p[:, 0])

    def to_json(self) -> dict:
        return {"kind": self.kind, "expert": self.expert, "eps": self.eps}

    @classmethod
    def from_json(cls, d: dict) -> "ReferenceHead":
        return cls(str(d["expert"]), float(d["eps"]))
