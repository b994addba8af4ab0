"""Fit every head of one condition on its non-test rows, choose one, freeze an artifact.

Heads: stack (all experts but the reference and pointwise ones), route (the stack's
experts plus the pointwise expert) and reference (the reference expert alone). The
choice goes through the two gates of `selection.gates`; the artifact records the
decision, every candidate's dev accuracy per gate and the reason.

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
from baer_fast.heads.reference import ReferenceHead
from baer_fast.heads.router import cv_folds, fit_router
from baer_fast.heads.stack import LAMBDAS, StackHead, fit_stack, fit_stack_weights
from baer_fast.selection.gates import HEAD_CHOICES, decide, expert_correct, head_correct, reference_gate, router_gate
from baer_fast.io.splits import SplitSpec, roles as split_roles

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


def resolve_expert(option: str | None, default: str, present: set, what: str) -> str | None:
    """An explicitly named expert must exist; the default name is used only if present."""
    if option is None:
        return default if default in present else None
    if option not in present:
        raise InputError(f"--{what}-expert {option!r} is not an expert of these signals "
                         f"(experts: {', '.join(sorted(present))})")
    return option


def cv_stack_correct(stack: StackHead, records: Sequence, y: np.ndarray, folds: np.ndarray) -> np.ndarray:
    """[N] out-of-fold correctness of the stack at its chosen lambda, on the router's folds."""
    phi = stack.features(records)
    correct = np.zeros(len(y), bool)
    for f in np.unique(folds):
        tr, te = folds != f, folds == f
        rms, w = fit_stack_weights(phi[tr], y[tr], stack.lam)
        correct[te] = head_correct((phi[te] / rms) @ w, y[te])
    return correct


def split_accuracy(correct: np.ndarray, roles: Sequence[str]) -> dict:
    roles = np.asarray(roles)
    out = {}
    for name in ("selection", "calibration"):
        mask = roles == name
        out[f"{name}_accuracy"] = float(correct[mask].mean()) if mask.any() else 0.0
    out["dev_accuracy"] = float(correct.mean())
    return out


def _check_rows(roles: list[str]) -> None:
    for need in ("selection", "calibration"):
        n = roles.count(need)
        if n < 2:
            raise InputError(f"only {n} labelled rows in the {need} split; fitting needs at least 2 "
                             "in each of selection and calibration (add data or explicit 'split' fields)")


def fit_condition(records: Sequence, *, condition: str, spec: SplitSpec = SplitSpec(),
                  lambdas=LAMBDAS, eps: float = EPS, head: str = "auto",
                  reference_expert: str | None = None, pointwise_expert: str | None = None) -> dict:
    """-> artifact dict (unsaved): every head fitted on non-test rows, one deployed.

    head: "auto" runs the gates; "stack" / "route" / "reference" forces one (ablations).
    """
    if head not in HEAD_CHOICES:
        raise InputError(f"unknown head {head!r} (choose from {', '.join(HEAD_CHOICES)})")
    rows, roles = training_rows(records, spec)
    _check_rows(roles)
    present = {k for r in rows for k in r.experts}
    ref = resolve_expert(reference_expert, "reference", present, "reference")
    pnt = resolve_expert(pointwise_expert, "pointwise", present, "pointwise")
    if ref is not None and ref == pnt:
        raise InputError(f"expert {ref!r} cannot be both the reference and the pointwise expert")
    if head == "reference" and ref is None:
        raise InputError("--head reference needs a reference-verification expert: name it with "
                         "--reference-expert NAME (no expert called 'reference' in these signals)")
    stack_experts = sorted(present - {ref, pnt})
    if not stack_experts:
        raise InputError("no expert left for the stack once the reference/pointwise experts are set aside")
    route_experts = sorted(set(stack_experts) | ({pnt} if pnt else set()))
    categories = sorted({r.subset for r in rows})
    y = np.array([1.0 if r.label == "a" else -1.0 for r in rows])

    stack, stack_info = fit_stack(rows, y, roles, experts=stack_experts, categories=categories,
                                  lambdas=lambdas, eps=eps)
    log.info("stack: %d features, lambda=%g", stack_info["dim"], stack_info["lambda"])
    folds = cv_folds([r.id for r in rows])
    router, route_info = fit_router(rows, y, experts=route_experts, categories=categories, folds=folds, eps=eps)
    route_cv = route_info.pop("cv_correct")
    log.info("route: %s reliability model, CV routed accuracy %s", route_info["model"],
             {k: round(v, 4) for k, v in route_info["cv_routed_accuracy"].items()})
    stack_cv = cv_stack_correct(stack, rows, y, folds)
    gates = {"route": router_gate(route_cv, stack_cv)}
    heads = {"stack": stack.to_json(), "route": router.to_json()}
    candidates = {"stack": {**split_accuracy(head_correct(stack.score(rows), y), roles),
                            "cv_accuracy": float(stack_cv.mean()), "in_sample": True},
                  "route": {**split_accuracy(head_correct(router.score(rows), y), roles),
                            "cv_accuracy": float(route_cv.mean()), "in_sample": True}}
    if ref is not None:
        ref_head = ReferenceHead(ref, eps)
        ref_correct = head_correct(ref_head.score(rows), y)
        base = sorted(present - {ref})
        gates["reference"] = reference_gate(ref_correct, expert_correct(rows, base, y, eps), base, roles)
        heads["reference"] = ref_head.to_json()
        candidates["reference"] = {**split_accuracy(ref_correct, roles), "in_sample": False}
    deployed, reason = decide(gates["route"], gates.get("reference"), head)
    log.info("deployed %s: %s", deployed, reason)
    return {
        "condition": condition,
        "library_version": __version__,
        "head": deployed,
        "forced": head != "auto",
        "experts": sorted(present),
        "reference_expert": ref,
        "pointwise_expert": pnt,
        "feature_spec": {"eps": eps, "categories": categories},
        "heads": heads,
        "fit_report": {"stack": stack_info, "route": route_info},
        "selection": {"deployed": deployed, "forced": head != "auto", "reason": reason,
                      "gates": gates, "candidates": candidates},
        "fitted_on": {"n_rows": len(rows), "n_selection": roles.count("selection"),
                      "n_calibration": roles.count("calibration"),
                      "ids_sha256": ids_digest(rows), "split": spec.to_json()},
    }
