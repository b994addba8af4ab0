"""The label-free default head: the mean signed evidence z~ over a fixed list of experts.

    s(x) = (1/K) sum_k zt_k(x),   experts = DEFAULT_EXPERTS (direct, score)

Nothing is fitted, so it needs no labels and no data, and a pair's score depends on that
pair's runs alone (batch-independent). Each zt_k is odd under the candidate swap (p -> 1-p,
delta unchanged), so s(Tx) = -s(x). Why these experts and not pride, calibraeval or pointwise:
docs/serving.md ("The default head"). `Judge.from_pretrained(model)` uses it without a head.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from baer_fast.features.evidence import EPS, evidence, runs_tensor

# the two pairwise prompt experts that need no fitted parameters
DEFAULT_EXPERTS = ("direct", "score")


@dataclass
class DefaultHead:
    experts: list[str] = field(default_factory=lambda: list(DEFAULT_EXPERTS))
    eps: float = EPS
    kind: str = "default"

    def score(self, records: Sequence) -> np.ndarray:
        _, _, _, zt = evidence(runs_tensor(records, self.experts), self.eps)     # [N, K]
        return zt.mean(axis=1) if len(records) else np.zeros(0)

    def to_json(self) -> dict:
        return {"kind": self.kind, "experts": list(self.experts), "eps": self.eps,
                "formula": "mean over experts of zt = logit(p) / (1 + 4 delta)"}

    @classmethod
    def from_json(cls, d: dict) -> "DefaultHead":
        return cls(list(d["experts"]), float(d["eps"]))
