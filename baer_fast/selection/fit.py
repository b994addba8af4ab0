"""Fit every head of one condition on its non-test rows, choose one, freeze an artifact.

Test rows are dropped before anything else is read from them, so blanking their
labels cannot change the artifact. The artifact records which ids fitted it.
"""
from __future__ import annotations

import hashlib
import logging
from typing import Sequence

import numpy as np

from baer_fast import __version__
from baer_fast.errors import InputError
from baer_fast.features.evidence import EPS
from baer_fast.heads.stack import LAMBDAS, fit_stack
from baer_fast.selection.splits import SplitSpec, roles as split_roles

log = logging.getLogger("baer_fast")


def conditions_of(records: Sequence) -> set:
    return {r.meta.get("condition") for r in records if r.meta.get("condition") is not None}


def check_one_condition(records: Sequence, where: str) -> None:
    found = conditions_of(records)
    if len(found) > 1:
        raise InputError(f"signals mix several conditions ({', '.join(sorted(found))}); "
                         "fit one condition (benchmark x backbone) at a time", path=where,
                         field="meta.condition")


def training_rows(records: Sequence, spec: SplitSpec) -> tuple[list, list[str]]:
    """Labelled (a/b) non-test rows and their roles; test rows are never inspected further."""
    rows, roles = [], []
    for rec, role in zip(records, split_roles(records, spec)):
        if role != "test" and rec.label in ("a", "b"):
            rows.append(rec)
            roles.append(role)
    return rows, roles


def ids_digest(records: Sequence) -> str:
    h = hashlib.sha256()
    for pid in sorted(r.id for r in records):
        h.update(pid.encode("utf-8") + b"\n")
    return h.hexdigest()


def fit_condition(records: Sequence, *, condition: str, spec: SplitSpec = SplitSpec(),
                  lambdas=LAMBDAS, eps: float = EPS) -> dict:
    """-> artifact dict (unsaved) with the stack head deployed."""
    rows, roles = training_rows(records, spec)
    for need in ("selection", "calibration"):
        n = roles.count(need)
        if n < 2:
            raise InputError(f"only {n} labelled rows in the {need} split; fitting needs at least 2 "
                             "in each of selection and calibration (add data or explicit 'split' fields)")
    experts = sorted({k for r in rows for k in r.experts})
    categories = sorted({r.subset for r in rows})
    y = np.array([1.0 if r.label == "a" else -1.0 for r in rows])
    stack, info = fit_stack(rows, y, roles, experts=experts, categories=categories,
                            lambdas=lambdas, eps=eps)
    log.info("stack: %d features, lambda=%g", info["dim"], info["lambda"])
    return {
        "condition": condition,
        "library_version": __version__,
        "head": "stack",
        "forced": False,
        "experts": experts,
        "feature_spec": {"eps": eps, "categories": categories},
        "heads": {"stack": stack.to_json()},
        "fit_report": {"stack": info},
        "selection": {"deployed": "stack", "reason": "stacking is the initial choice"},
        "fitted_on": {"n_rows": len(rows), "n_selection": roles.count("selection"),
                      "n_calibration": roles.count("calibration"),
                      "ids_sha256": ids_digest(rows), "split": spec.to_json()},
    }
