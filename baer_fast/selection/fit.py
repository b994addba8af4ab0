"""Fit every head of one condition on its non-test rows, choose one, freeze an artifact.

Heads: mean (equal weights), vote (weights logit of each expert's accuracy), shrunk (the stack pulled toward the mean), stack (all experts
but the reference and pointwise ones), constant (the best single stack expert), route (the
stack's experts plus the pointwise expert) and reference (the reference expert alone). All
but reference are compared on the same nested, repeated out-of-fold predictions; all but
mean, vote and reference are ordered for the standard-error rule (`selection.rule`; the mean is
the shrunk stack's large-lambda end, the vote a label-efficient reweighting of it, both reported); the reference head goes through the paper's
two gates (`selection.gates`). Every candidate's figures and the reason are recorded.

Test rows are dropped before anything else is read from them, so blanking their
labels cannot change the artifact; rows are put in id order, so file order cannot either.
"""
from __future__ import annotations

import hashlib
import logging
import time
from typing import Sequence

import numpy as np

from baer_fast import __version__
from baer_fast.errors import InputError
from baer_fast.features.evidence import EPS, MemoRecords
from baer_fast.heads.reference import ReferenceHead
from baer_fast.heads.router import CV_TREES, RouterHead, choose_model, fit_model
from baer_fast.heads.single import ConstantHead, baseline_pool, native_credit, strict_correct
from baer_fast.heads.stack import (LAMBDAS, StackHead, cv_lambda, cv_shrunk_lambda, fit_shrunk_weights,
                                   fit_stack_weights, mean_weights, vote_weights, expert_accuracy)
from baer_fast.heads.tiebreak import fit_tiebreak
from baer_fast.selection.gates import HEAD_CHOICES, decide, head_correct, reference_gate
from baer_fast.selection.nested import (BAG_PARTS, CANDIDATES, INNER_FOLDS, N_FOLDS, N_REPEATS, RULE_ORDER, SALT,
                                        DevData, bag_parts, best_constant, dev_data, fold_accuracy, fold_assignments,
                                        oof_scores, one_blas_thread)
from baer_fast.selection.rule import BAR, se_choice
from baer_fast.io.splits import SplitSpec, roles as split_roles, split_key
from baer_fast.progress import PROGRESS_EVERY_S, progress

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


NO_EXPERT = object()      # a reference/pointwise role left empty on purpose (resolve_expert -> None)


def resolve_expert(option, default: str, present: set, what: str) -> str | None:
    """An explicitly named expert must exist; the default name is used only if present."""
    if option is NO_EXPERT:
        return None
    if option is None:
        return default if default in present else None
    if option not in present:
        raise InputError(f"--{what}-expert {option!r} is not an expert of these signals "
                         f"(experts: {', '.join(sorted(present))})")
    return option


def subset_roles(present: set, keep: set, *, groups=(), reference_expert=None, pointwise_expert=None) -> dict:
    """The reference/pointwise roles of a fit on the experts `keep` of a bank with experts `present`
    (`fit --budget`): the expert the whole bank's fit sets aside where `keep` has it, else none; none at
    all where setting them aside would leave the stack no expert, for all pairs or for the pairs of a
    subset (`groups`: each subset's experts, --per-subset), as the budget search scored them in it."""
    names = {"reference_expert": resolve_expert(reference_expert, "reference", present, "reference"),
             "pointwise_expert": resolve_expert(pointwise_expert, "pointwise", present, "pointwise")}
    aside = {opt: name for opt, name in names.items() if name in keep}
    if any(g and not set(g) - set(aside.values()) for g in [keep, *groups]):
        aside = {}
    return {opt: aside.get(opt, NO_EXPERT) for opt in names}


def split_accuracy(correct: np.ndarray, roles: Sequence[str]) -> dict:
    roles = np.asarray(roles)
    out = {}
    for name in ("selection", "calibration"):
        mask = roles == name
        out[f"{name}_accuracy"] = float(correct[mask].mean()) if mask.any() else 0.0
    out["dev_accuracy"] = float(correct.mean())
    return out


def _check_rows(roles: list[str], records: Sequence = ()) -> None:
    for need in ("selection", "calibration"):
        n = roles.count(need)
        if n < 2:
            labels = [r.label for r in records]
            seen = (f" ({len(labels)} rows read: {sum(lb in ('a', 'b') for lb in labels)} labelled a/b, "
                    f"{labels.count('tie')} tie, {labels.count(None)} unlabelled; ties and test rows are never "
                    "fitted on)") if records else ""
            raise InputError(f"only {n} labelled rows in the {need} split{seen}; fitting needs at least 2 "
                             "in each of selection and calibration (add data or explicit 'split' fields)",
                             field="label")


FEW_ROWS = 30         # labelled non-test rows under which fit warns (LLMBar Natural's dev sets hold about 60)
MAX_GROUPS = 256      # distinct subsets (or categories): each is a stack weight and a router feature


def _check_groups(rows: Sequence) -> None:
    """A subset or category per pair (an id-like column) would give every pair its own weight: the
    nested CV's solves grow with the square of the groups (2k unique subsets: over 5 minutes where one
    subset takes 12 s) and the router's features with rows x groups (50k: tens of GB). Refused."""
    for field, values in (("subset", {r.subset for r in rows}),
                          ("category", {r.category for r in rows if getattr(r, "category", None)})):
        if len(values) > MAX_GROUPS:
            raise InputError(f"{len(values)} distinct values over {len(rows)} labelled training rows; the stack "
                             f"and the router give each value its own weight or feature (at most {MAX_GROUPS}): "
                             f"use a coarser {field} (a benchmark section, a task type) or leave it out",
                             field=field)


def _pool_credit(rows, pool: list[str], y: np.ndarray, eps: float) -> tuple[np.ndarray, list[str]]:
    """[N, K] credit of each pool protocol under its reading that is stronger on these rows."""
    strict = strict_correct(rows, pool, y, eps).astype(np.float64)
    native = native_credit(rows, pool, y)
    use_native = native.mean(axis=0) > strict.mean(axis=0)
    return np.where(use_native[None, :], native, strict), ["native" if u else "strict" for u in use_native]


def _nested(data: DevData, ids: list[str], candidates: list[str], repeats: int) -> tuple[dict, str, list]:
    """Every candidate on the same out-of-fold rows; the standard-error rule's choice."""
    folds = fold_assignments(ids, N_FOLDS, repeats)
    acc, figures = {}, {}
    # a 50k-row fit is minutes of folds that would otherwise print nothing; a fit of seconds (the demo's) prints
    # no progress at all
    t0 = time.monotonic()
    bar = progress(len(candidates) * sum(len(np.unique(f)) for f in folds), desc=f"fit: nested CV on {len(ids)} rows",
                   unit="fold", every_s=PROGRESS_EVERY_S, every_frac=1.0, delay=PROGRESS_EVERY_S,
                   quiet=not log.isEnabledFor(logging.INFO))
    for c in candidates:
        bar.set_postfix_str(c)
        scores, chosen = oof_scores(data, c, folds, on_fold=bar.update)
        acc[c] = fold_accuracy(scores, data.y, folds)
        figures[c] = {"oof_accuracy": float(acc[c].mean()), "fold_accuracy": acc[c].tolist(),
                      "fold_sd": float(acc[c].std(axis=1, ddof=1).mean()) if acc[c].shape[1] > 1 else 0.0,
                      "chosen_in_folds": _tally(chosen)}
    bar.close()
    choice, steps = se_choice(acc, RULE_ORDER, BAR)
    if log.isEnabledFor(logging.INFO) and time.monotonic() - t0 >= PROGRESS_EVERY_S:    # say what comes next
        log.info("fit: refitting every head on all %d non-test rows", len(ids))
    return figures, choice, steps


def _tally(chosen: list[dict]) -> dict:
    out = {}
    for info in chosen:
        for k, v in info.items():
            key = f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
            out[key] = out.get(key, 0) + 1
    return dict(sorted(out.items()))


def _final_heads(data: DevData, ids: list[str], *, categories, task_categories, lambdas, eps, route: bool):
    """Refit every candidate on all non-test rows, hyper-parameters by CV over one id-seeded assignment."""
    folds = fold_assignments(ids, N_FOLDS, 1, SALT + ":final")[0]
    n_exp = len(data.stack_experts)
    common = dict(categories=list(categories), task_categories=list(task_categories), eps=eps)
    rms, w = mean_weights(data.phi, n_exp)
    heads = {"mean": StackHead(data.stack_experts, rms=rms, weights=w, lam=0.0, kind="mean", **common)}
    rms, w = vote_weights(data.phi, data.y, n_exp)
    heads["vote"] = StackHead(data.stack_experts, rms=rms, weights=w, lam=0.0, kind="vote", **common)
    lam_s, table_s = cv_shrunk_lambda(data.phi, data.y, folds, n_exp)
    rms, w = fit_shrunk_weights(data.phi, data.y, lam_s, n_exp, bag_parts(ids))
    heads["shrunk"] = StackHead(data.stack_experts, rms=rms, weights=w, lam=lam_s, kind="shrunk", **common)
    lam, lam_table = cv_lambda(data.phi, data.y, folds, lambdas)
    rms, w = fit_stack_weights(data.phi, data.y, lam)
    heads["stack"] = StackHead(data.stack_experts, rms=rms, weights=w, lam=lam, **common)
    k = best_constant(data.z, data.y)
    heads["constant"] = ConstantHead(data.stack_experts[k], eps)
    report = {"mean": {"weights": "1/K on each RMS-scaled zt", "dim": int(data.phi.shape[1])},
              "vote": {"weights": dict(zip(data.stack_experts, map(float, heads["vote"].weights[1:2 * n_exp:2]))),
                       "accuracy": dict(zip(data.stack_experts, map(float, expert_accuracy(data.phi, data.y, n_exp))))},
              "shrunk": {"lambda": lam_s, "lambda_table": table_s, "chosen_by": "cv_logloss",
                         "bagged": {"parts": BAG_PARTS, "rule": "mean of the weights fitted at lambda on each "
                                    "complement of BAG_PARTS id-hashed blocks of the rows"}},
              "stack": {"lambda": lam, "lambda_table": lam_table, "dim": int(data.phi.shape[1])},
              "constant": {"expert": heads["constant"].expert}}
    if route:
        kind, table, _ = choose_model(data.rho, data.t, data.zr, data.y, folds)
        heads["route"] = RouterHead(data.route_experts, list(categories), fit_model(kind, data.rho, data.t), eps,
                                    task_categories=list(task_categories))
        report["route"] = {"model": kind, "cv_routed_accuracy": table, "cv_trees": CV_TREES,
                           "dim": int(data.rho.shape[2]), "n_rows": int(data.rho.shape[0] * data.rho.shape[1])}
    return heads, report


def fit_condition(records: Sequence, *, condition: str, spec: SplitSpec = SplitSpec(),
                  lambdas=LAMBDAS, eps: float = EPS, head: str = "auto",
                  reference_expert: str | None = None, pointwise_expert: str | None = None,
                  repeats: int = N_REPEATS, internal: Sequence[str] = (),
                  baselines: Sequence[str] | None = None, tiebreak: bool = True) -> dict:
    """-> artifact dict (unsaved): every head fitted on non-test rows, one deployed.

    head: "auto" applies the standard-error rule and the reference gate; "mean" / "vote" / "shrunk" /
    "stack" / "constant" / "route" / "reference" forces one (ablations). internal/baselines: the baseline pool
    of the reference gate (`heads.single.baseline_pool`). tiebreak: fit the length tie-break of exact ties
    (`heads.tiebreak`; False keeps Eq. 1's ties, as the paper scores them).
    """
    if head not in HEAD_CHOICES:
        raise InputError(f"unknown head {head!r} (choose from {', '.join(HEAD_CHOICES)})")
    return _fit(records, condition=condition, spec=spec, lambdas=lambdas, eps=eps, head=head,
                reference_expert=reference_expert, pointwise_expert=pointwise_expert, repeats=repeats,
                internal=internal, baselines=baselines, tiebreak=tiebreak)


@one_blas_thread
def _fit(records, *, condition, spec, lambdas, eps, head, reference_expert, pointwise_expert, repeats,
         internal, baselines, tiebreak) -> dict:
    rows, roles = training_rows(records, spec)
    _check_rows(roles, records)
    _check_groups(rows)
    if len(rows) < FEW_ROWS:
        log.warning("fit: only %d labelled non-test rows; the nested CV's figures and the head it chooses are "
                    "noise at this size (each of its %d folds holds about %d rows): label more pairs",
                    len(rows), N_FOLDS, max(len(rows) // N_FOLDS, 1))
    order = sorted(range(len(rows)), key=lambda i: rows[i].id)      # canonical order: file order is irrelevant
    # each expert list's runs tensor is built once (read-only), not again by every head that scores these rows
    rows, roles = MemoRecords(rows[i] for i in order), [roles[i] for i in order]
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
    task_categories = sorted({r.category for r in rows if getattr(r, "category", None)})
    y = np.array([1.0 if r.label == "a" else -1.0 for r in rows])
    ids = [split_key(r) for r in rows]         # fold keys: a split group's rows share a fold
    data = dev_data(rows, y, stack_experts=stack_experts, route_experts=route_experts, categories=categories,
                    task_categories=task_categories, eps=eps)
    route = len(route_experts) > 1 or head == "route"       # one expert: the router is the constant head
    figures, choice, steps = _nested(data, ids, [c for c in CANDIDATES if c != "route" or route], repeats)
    log.info("nested CV (%d x %d folds): %s -> %s", repeats, N_FOLDS,
             {c: round(f["oof_accuracy"], 4) for c, f in figures.items()}, choice)
    fitted, report = _final_heads(data, ids, categories=categories, task_categories=task_categories,
                                  lambdas=lambdas, eps=eps, route=route)
    heads = {name: h.to_json() for name, h in fitted.items()}
    candidates = {name: {**split_accuracy(head_correct(h.score(rows), y), roles), "in_sample": True,
                         **figures.get(name, {})} for name, h in fitted.items()}
    gates = {"rule": {"order": list(RULE_ORDER), "steps": steps, "choice": choice,
                      "bar": BAR,
                      "rule": f"a later head (order: steadiest first) replaces the current choice only if its "
                              f"mean paired per-fold out-of-fold gain exceeds {BAR:g} standard errors "
                              "(nested, repeated CV on non-test rows)"}}
    if ref is not None:
        ref_head = ReferenceHead(ref, eps)
        ref_correct = head_correct(ref_head.score(rows), y)
        pool = ([e for e in baseline_pool(present, internal=internal, baselines=baselines) if e not in (ref, pnt)]
                or sorted(present - {ref}))    # BAER's own experts, whatever --reference/--pointwise-expert named
        credit, readings = _pool_credit(rows, pool, y, eps)
        gates["reference"] = {**reference_gate(ref_correct, credit, pool, roles, readings=readings),
                              "pool": pool}          # eval --head leaves the experts outside it out of its pool
        heads["reference"] = ref_head.to_json()
        candidates["reference"] = {**split_accuracy(ref_correct, roles), "in_sample": False}
    deployed, reason = decide(gates["rule"], gates.get("reference"), head)
    if deployed not in heads:
        raise InputError(f"--head {deployed} is not available for these signals")
    log.info("deployed %s: %s", deployed, reason)
    return {
        "condition": condition,
        "library_version": __version__,
        "head": deployed,
        "forced": head != "auto",
        "experts": sorted(present),
        "reference_expert": ref,
        "pointwise_expert": pnt,
        "feature_spec": {"eps": eps, "categories": categories, "task_categories": task_categories},
        "heads": heads,
        "fit_report": report,
        "selection": {"deployed": deployed, "forced": head != "auto", "reason": reason,
                      "nested_cv": {"folds": N_FOLDS, "repeats": repeats, "inner_folds": INNER_FOLDS,
                                    "salt": SALT},
                      "gates": gates, "candidates": candidates},
        "fitted_on": {"n_rows": len(rows), "n_selection": roles.count("selection"),
                      "n_calibration": roles.count("calibration"),
                      "ids_sha256": ids_digest(rows), "split": spec.to_json()},
        "tiebreak": fit_tiebreak(rows, y) if tiebreak else None,
    }
