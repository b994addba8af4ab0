"""Candidate-blind reference verification head (paper Eq. 8-9): s_ref(x) = z of one expert.

The expert's runs already carry v = sigma(logit v(a) - logit v(b)) (a solution written
without seeing either candidate, then a Y/N check of each candidate alone), so in the
signals format it is an ordinary expert; this head reads only that expert. Odd by
construction: a swap maps its runs u -> 1 - u, hence z -> -z.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from baer_fast.features.evidence import EPS, evidence, runs_tensor


@dataclass
class ReferenceHead:
    expert: str          # name of the reference-verification expert in the signals
    eps: float = EPS
    kind: str = "reference"

    @property
    def experts(self) -> list[str]:
        return [self.expert]

    def score(self, records: Sequence) -> np.ndarray:
        _, _, z, _ = evidence(runs_tensor(records, [self.expert]), self.eps)
        return z[:, 0]

    def to_json(self) -> dict:
        return {"kind": self.kind, "expert": self.expert, "eps": self.eps}

    @classmethod
    def from_json(cls, d: dict) -> "ReferenceHead":
        return cls(str(d["expert"]), float(d["eps"]))
