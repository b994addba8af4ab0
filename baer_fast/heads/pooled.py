"""Pooled head for a condition without labels: a weighted mean of heads fitted elsewhere.

s(x) = sum_h w_h s_h(x) / scale_h / sum_h w_h. Each member is a head of another condition
(any kind), `scale_h` its score RMS on the target's pairs and `w_h` its weight, both frozen
at fit time (`selection/transfer.py` sets them without labels). A sum of antisymmetric
scores is antisymmetric.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

# a member is an artifact's deployed head (its cascade unused; a pooled one does not nest)
MEMBER_KINDS = ("mean", "vote", "shrunk", "stack", "constant", "route", "reference")


@dataclass
class PooledHead:
    members: list            # [(head, scale, weight)]
    params: list             # the members' JSON, kept for to_json
    kind: str = "pooled"

    def member_scores(self, records: Sequence) -> np.ndarray:
        """[H, N] each member's score divided by its scale."""
        return np.stack([np.asarray(h.score(records), dtype=np.float64) / sc for h, sc, _ in self.members])

    def score(self, records: Sequence) -> np.ndarray:
        w = np.array([wt for _, _, wt in self.members])
        # summed per pair in member order, not by BLAS gemv: a pair's bits never depend on the batch
        return np.sum(w[:, None] * self.member_scores(records), axis=0) / w.sum()

    def to_json(self) -> dict:
        return {"kind": self.kind, "members": self.params}

    @classmethod
    def from_json(cls, d: dict) -> "PooledHead":
        members = [(member_class(m["head"]["kind"]).from_json(m["head"]), float(m["scale"]), float(m["weight"]))
                   for m in d["members"]]
        return cls(members, list(d["members"]))


def member_class(kind: str):
    """The class of a member head (MEMBER_KINDS); KeyError otherwise."""
    from baer_fast.heads.reference import ReferenceHead
    from baer_fast.heads.router import RouterHead
    from baer_fast.heads.single import ConstantHead
    from baer_fast.heads.stack import StackHead
    if kind not in MEMBER_KINDS:
        raise KeyError(kind)
    return {"route": RouterHead, "reference": ReferenceHead, "constant": ConstantHead}.get(kind, StackHead)
