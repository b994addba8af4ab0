"""A head for a condition whose signals have no labels, from heads fitted on other conditions.

Label-free rule (docs/cost.md): the candidates are the given heads whose experts all appear
in the target's signals, none pruned per subset (a member applies no allocation). Each member's
scores on the target pairs are divided by their RMS there (heads of different conditions speak
on different scales). A member's weight is its
agreement with the others: w_h = max(0, 2 a_h - 1), a_h the share of target pairs where
sign(s_h) equals the sign of the sum of the other members' scaled scores (all weights 0, or
one member: equal weights). The deployed head is the weighted mean (`heads/pooled.py`).
Labels of the target are dropped before anything is read, so they cannot change the artifact;
agreement and RMS are unchanged under the swap, so the pooled head stays antisymmetric.
"""
from __future__ import annotations

import glob
import logging
import os
from dataclasses import replace
from typing import Sequence

import numpy as np

from baer_fast import __version__
from baer_fast.errors import InputError
from baer_fast.heads.pooled import MEMBER_KINDS, member_class

log = logging.getLogger("baer_fast")


def head_paths(items: Sequence[str], out_path: str | None = None) -> list[str]:
    """Files and folders (every *.json inside, sorted, but `out_path`: fit's own artifact, whose
    earlier version a rerun would otherwise list as skipped) -> artifact paths."""
    own = os.path.realpath(out_path) if out_path else None
    out = []
    for item in items:
        out += [p for p in sorted(glob.glob(os.path.join(item, "*.json"))) if os.path.realpath(p) != own] \
            if os.path.isdir(item) else [item]
    if not out:
        raise InputError(f"names no head artifact (no *.json in {', '.join(items)})", field="--transfer-from")
    return out


def unlabelled(records: Sequence) -> list:
    return [replace(r, label=None) for r in records]


def agreement_weights(z: np.ndarray) -> np.ndarray:
    """z [H, N] scaled member scores -> [H] weights (see the module docstring)."""
    if len(z) == 1:
        return np.ones(1)
    total = z.sum(axis=0)
    agree = np.array([np.mean(np.sign(z[h]) == np.sign(total - z[h])) for h in range(len(z))])
    w = np.maximum(0.0, 2.0 * agree - 1.0)
    return w if w.sum() > 0 else np.ones(len(z))


def unusable_reasons(arts: Sequence[tuple[str, dict]], present: set, most: int = 4) -> str:
    """Why each head cannot be a member: a pooled head itself, one pruned per subset, or the experts the
    signals lack."""
    out = []
    for name, a in arts:
        if a["head"] not in MEMBER_KINDS:
            out.append(f"{name} is a {a['head']} head")
            continue
        if a.get("allocation") is not None:
            out.append(f"{name} is pruned per subset (fit --per-subset), which a member's head would not apply; "
                       "refit it without --per-subset")
            continue
        lack = sorted(set(a["experts"]) - present)
        more = f" and {len(lack) - most} more" if len(lack) > most else ""
        out.append(f"{name} needs {', '.join(lack[:most])}{more}, which these signals lack")
    return "; ".join(out)


def fit_transfer(records: Sequence, arts: Sequence[tuple[str, dict]], *, condition: str) -> dict:
    """arts: (name, loaded artifact) of other conditions -> pooled artifact (unsaved)."""
    target = unlabelled(records)
    present = {k for r in target for k in r.experts}
    fits = [set(a["experts"]) <= present and a["head"] in MEMBER_KINDS and a.get("allocation") is None
            for _, a in arts]
    usable = [na for na, ok in zip(arts, fits) if ok]
    skipped = sorted(n for (n, _), ok in zip(arts, fits) if not ok)
    if skipped and usable:
        log.warning("--transfer-from: %d of %d heads skipped (%s)", len(skipped), len(arts),
                    unusable_reasons([na for na, ok in zip(arts, fits) if not ok], present))
    if not usable:
        raise InputError(f"none of the {len(arts)} heads can score these signals ({unusable_reasons(arts, present)}); "
                         "fit the source heads on experts these signals have (`fit --experts "
                         f"{','.join(sorted(present))}`)", field="--transfer-from")
    heads = [member_class(a["head"]).from_json(a["heads"][a["head"]]) for _, a in usable]
    raw = np.stack([np.asarray(h.score(target), dtype=np.float64) for h in heads])
    scale = np.sqrt(np.mean(raw ** 2, axis=1))
    scale = np.where(scale > 0, scale, 1.0)
    w = agreement_weights(raw / scale[:, None])
    members = [{"source": n, "condition": a["condition"], "artifact_checksum": a.get("checksum"),
                "head": a["heads"][a["head"]], "experts": list(a["experts"]), "scale": float(sc), "weight": float(wt)}
               for (n, a), sc, wt in zip(usable, scale, w)]
    reason = (f"label-free transfer: weighted mean of {len(usable)} heads of other conditions "
              f"(weights by agreement with the others on {len(target)} unlabelled pairs)")
    return {
        "condition": condition, "library_version": __version__, "head": "pooled", "forced": False,
        "experts": sorted({e for _, a in usable for e in a["experts"]}),
        "reference_expert": None, "pointwise_expert": None,
        "heads": {"pooled": {"kind": "pooled", "members": members}},
        "fit_report": {"transfer": {"skipped": skipped, "n_pairs": len(target)}},
        "selection": {"deployed": "pooled", "forced": False, "reason": reason, "gates": {}, "candidates": {}},
        "fitted_on": {"n_rows": 0, "n_selection": 0, "n_calibration": 0, "unlabelled_pairs": len(target),
                      "labels_read": False},
    }
