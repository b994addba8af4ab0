"""A head pruned per pair subset (`fit --budget B --per-subset`, selection/allocation.py).

The artifact's `allocation` maps each subset seen in training to the experts run on its pairs; a
pair of any other subset runs them all (the artifact's `experts`). An expert a pair's subset does
not run gives it no evidence (z = 0), in training and at scoring alike, so records that hold more
experts than the allocation (signals of the whole bank) score as if only the allocated ran. The mask
depends on the subset only, which the swap keeps, so an antisymmetric head stays antisymmetric.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np


def experts_for(allocation: dict, union: Sequence[str], subset: str) -> list[str]:
    """The experts run on a pair of this subset: its allocation, or every expert for an unseen subset."""
    return list(allocation[subset]) if subset in allocation else list(union)


def allocate(records: Sequence, allocation: dict, union: Sequence[str]) -> list:
    """Each record holding only the experts its subset runs (its other runs dropped)."""
    out = []
    for r in records:
        keep = set(experts_for(allocation, union, r.subset))
        out.append(r if set(r.experts) <= keep else replace(r, experts={k: v for k, v in r.experts.items() if k in keep}))
    return out


@dataclass
class AllocatedHead:
    inner: object                 # the deployed head, fitted on allocated records
    allocation: dict              # subset -> experts
    union: list                   # every expert the artifact runs
    kind: str = "allocated"

    def score(self, records: Sequence) -> np.ndarray:
        return self.inner.score(allocate(records, self.allocation, self.union))

    def chosen_experts(self, records: Sequence) -> list:
        pick = getattr(self.inner, "chosen_experts", None)
        return pick(allocate(records, self.allocation, self.union)) if pick else [None] * len(records)
