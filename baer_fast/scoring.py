"""Frozen artifact + signals records -> score records. Never reads labels.

Score record: {"id", "score", "p_a", "winner", "head", "expert", "condition"}; `expert`
names the routed expert for the routing head and is null otherwise. `winner` is "a" / "b" by the
score's sign, and "tie" where round(|s|, 9) == 0: a score of 0 names no response, in either order.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from baer_fast import artifact as artifact_io
from baer_fast.errors import InputError
from baer_fast.heads.cascade import strength


def check_experts(art: dict, records: Sequence, where: str) -> None:
    """Every expert the artifact uses must appear somewhere in the signals being scored."""
    present = {k for r in records for k in r.experts}
    missing = [e for e in art["experts"] if e not in present]
    if missing and records:
        line = getattr(records[0], "line", 0) or None     # the first record lacks it, like all others
        fix = ("pass --head with a head fitted on these signals" if art["head"] == "default" else
               "score the signals of the condition the head was fitted on")
        raise InputError(f"expert {missing[0]!r} of the {art['head']} head is absent from every record "
                         f"({len(missing)} missing); {fix}",
                         path=where, line=line, field=f"experts.{missing[0]}")


def sigmoid(s: float) -> float:
    return 1.0 / (1.0 + math.exp(-s)) if s >= 0 else math.exp(s) / (1.0 + math.exp(s))


def score_records(art: dict, records: Sequence, head=None) -> list[dict]:
    head = head or artifact_io.deployed_head(art)
    s = np.asarray(head.score(records), dtype=np.float64)
    chosen = head.chosen_experts(records) if hasattr(head, "chosen_experts") else [None] * len(records)
    winner = np.where(strength(s) == 0, "tie", np.where(s > 0, "a", "b"))
    return [{"id": r.id, "score": float(si), "p_a": sigmoid(float(si)),
             "winner": str(w), "head": art["head"], "expert": e,
             "condition": art["condition"]} for r, si, w, e in zip(records, s, winner, chosen)]


def missing_evidence(art: dict, records: Sequence) -> int:
    """How many (pair, expert) cells of the artifact's experts have no run at all (p = 0.5); under a
    per-subset allocation, only the experts the pair's subset runs count."""
    from baer_fast.heads.allocation import experts_for
    n = 0
    for r in records:
        for e in experts_for(art["allocation"], art["experts"], r.subset) if art.get("allocation") else art["experts"]:
            runs = r.experts.get(e)
            n += runs is None or all(u is None for u in runs)
    return n
