"""Deterministic data roles from a hash of the pair id; an explicit `split` field wins.

The role of a pair never depends on its label, its position in a file, or the
other pairs present, so every backbone of a benchmark sees the same split. Pairs that share
`meta.split_group` (RewardBench 2's pairs of one prompt, which share its chosen completion)
are hashed by that key instead of their ids, so a group never straddles fit and test.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass


@dataclass(frozen=True)
class SplitSpec:
    seed: str = "baer-v1"       # salt of the id hash; change it to draw a different split
    selection: float = 0.2      # share of pairs used to screen candidates (first gate)
    calibration: float = 0.4    # share used to choose lambda and as the second gate
    # the rest (0.4) is test: never read by fit

    def __post_init__(self):
        if not (0 < self.selection and 0 < self.calibration and self.selection + self.calibration < 1):
            raise ValueError("split shares must be positive and leave room for a test split")

    def to_json(self) -> dict:
        return {"seed": self.seed, "selection": self.selection, "calibration": self.calibration}


def hash_unit(pair_id: str, seed: str) -> float:
    """A uniform number in [0, 1) from sha256(seed:id)."""
    digest = hashlib.sha256(f"{seed}:{pair_id}".encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2.0 ** 64


def role(pair_id: str, explicit: str | None = None, spec: SplitSpec = SplitSpec()) -> str:
    if explicit is not None:
        return explicit
    x = hash_unit(pair_id, spec.seed)
    if x < spec.selection:
        return "selection"
    return "calibration" if x < spec.selection + spec.calibration else "test"


def split_key(record) -> str:
    """What a record's role is hashed from: its `meta.split_group` when set, else its id."""
    group = (getattr(record, "meta", None) or {}).get("split_group")
    return f"group:{group}" if isinstance(group, str) and group else record.id


def roles(records, spec: SplitSpec = SplitSpec()) -> list[str]:
    return [role(split_key(r), r.split, spec) for r in records]
