"""Early exit: fit the two-stage head (cheap stack, tau) and run its stages over pairs.

Stage 1 is the subset the budget search (selection/budget.py) picks at `cheap_budget`; stage 2 is
the deployed full head, stood in for by the full stack. tau comes from nested out-of-fold scores:
stage 1's from the search run inside each outer training fold (`budget.nested_search`). The exit
region grows from the most confident pairs down, never below `min_confidence` (3:1 odds), while
    min(wins - losses, 0) / N - z sqrt(wins + losses) / N >= -tolerance,
wins / losses counting exited pairs where only stage 1 / only the full stack is right: wins may
offset losses but never count as a gain, and every disagreement adds noise. It stops at the first failure;
tau = inf (never exit) when none is shown. The artifact keeps the full head as deployed and adds
`cascade` (stage-1 stack and experts, tau, CV figures, costs); `artifact.deployed_head` wraps them.
A cascade expected to cost more than the full head is not added (`cascade_declined` says why).
"""
from __future__ import annotations

import contextlib
import logging
import math
from dataclasses import dataclass, replace
from typing import Callable, Sequence

import numpy as np

from baer_fast.errors import InputError
from baer_fast.heads.cascade import ROUND_DIGITS, CascadeHead, strength
from baer_fast.heads.stack import StackHead
from baer_fast.selection.budget import (CostModel, expert_costs, fit_stack, labelled_rows, parse_budget,
                                       plan_with_nested, restrict)
from baer_fast.io.splits import SplitSpec
from baer_fast.selection.costs import SharedPrefill, generating, subset_cost

log = logging.getLogger("baer_fast")


@dataclass(frozen=True)
class CascadeSpec:
    cheap_budget: str = "1/3"      # stage 1's budget (fraction of the full bank's cost, or tokens=N)
    tolerance: float = 0.01        # CV accuracy the exits may cost against the full stack, noise included
    noise_z: float = 1.0           # margin for fold noise, in standard errors (sqrt of the disagreements)
    min_confidence: float = math.log(3.0)   # |s1| below this (odds under 3:1, or no evidence) never exits


def choose_tau(s1, s2, y: np.ndarray, tolerance: float = 0.01, noise_z: float = 1.0,
               min_confidence: float = math.log(3.0)) -> dict:
    """s1, s2: [R, N] out-of-fold scores of stage 1 / the full stack over R fold assignments."""
    s1, s2 = np.atleast_2d(np.asarray(s1, np.float64)), np.atleast_2d(np.asarray(s2, np.float64))
    r1, r2 = np.where(s1 >= 0, 1.0, -1.0) == y, np.where(s2 >= 0, 1.0, -1.0) == y
    conf, n = strength(s1), max(len(y), 1)
    only1, only2 = r1 & ~r2, ~r1 & r2
    floor = max(float(min_confidence), 10.0 ** -ROUND_DIGITS)       # s1 = 0 (no evidence) never exits
    best = {"tau": math.inf, "cv_exit_rate": 0.0, "wins": 0.0, "losses": 0.0, "bound": 0.0}
    for tau in sorted({float(t) for t in conf.ravel() if t >= floor}, reverse=True):
        ex = conf >= tau
        wins, losses = float(np.mean(np.sum(ex & only1, axis=1))), float(np.mean(np.sum(ex & only2, axis=1)))
        bound = min(wins - losses, 0.0) / n - noise_z * math.sqrt(wins + losses) / n
        if bound < -tolerance - 1e-12:
            break
        best = {"tau": tau, "cv_exit_rate": float(ex.mean()), "wins": wins, "losses": losses, "bound": bound}
    full = float(r2.mean())
    return {**best, "cv_accuracy": full + (best["wins"] - best["losses"]) / n, "full_cv_accuracy": full,
            "stage1_cv_accuracy": float(r1.mean()), "min_confidence": float(min_confidence)}


def fit_cascade(records: Sequence, full_art: dict, *, spec: SplitSpec = SplitSpec(),
                cascade: CascadeSpec = CascadeSpec(), costs_override=None, model: CostModel = CostModel()) -> dict:
    """-> full_art with `cascade` added (stage 1 fitted on the non-test rows of `records`)."""
    with _as_cascade_budget(cascade.cheap_budget):
        return _fit_cascade(records, full_art, spec=spec, cascade=cascade, costs_override=costs_override, model=model)


@contextlib.contextmanager
def _as_cascade_budget(budget: str):
    """Budget errors raised for stage 1 name the option the user gave: --cascade-budget, not --budget."""
    try:
        yield
    except InputError as e:
        if e.field != "--budget":
            raise
        raise InputError(f"stage 1 at {budget}: {e.message.replace('--budget', '--cascade-budget')}",
                         path=e.path, line=e.line, field="--cascade-budget") from None


def _fit_cascade(records: Sequence, full_art: dict, *, spec: SplitSpec, cascade: CascadeSpec, costs_override,
                 model: CostModel) -> dict:
    experts = list(full_art["experts"])
    mine = restrict(records, experts)
    kind, value = parse_budget(cascade.cheap_budget)
    if kind == "fraction":      # a share of the whole bank's cost, even when the full stage is pruned
        rows, _, _ = labelled_rows(records, spec)
        bank, _ = expert_costs(rows, sorted({k for r in rows for k in r.experts}), costs_override, model)
        value = value * sum(bank.values())
    if model.outer_repeats < 1:
        model = replace(model, outer_repeats=1)          # tau needs the nested scores
    plan, nested = plan_with_nested(mine, f"tokens={value!r}", spec=spec, costs_override=costs_override,
                                    model=model, warn=False)
    stage1 = plan["experts"]
    if set(stage1) >= set(experts):
        log.warning("cascade: the cheap stage (%s) is every expert the head runs, so there is no second stage to "
                    "skip; no cascade added (a smaller --cascade-budget, or a larger bank, gives one)", ", ".join(stage1))
        return {**full_art, "cascade_declined": {"reason": "the cheap stage holds every expert", "stage1_experts": stage1,
                                                 "cheap_budget": cascade.cheap_budget}}
    rows, roles, y = labelled_rows(mine, spec)
    head1, info1 = fit_stack(rows, y, roles, experts=stage1, categories=sorted({r.subset for r in rows}))
    tau = choose_tau(nested.s_sub, nested.s_full, y, cascade.tolerance, cascade.noise_z, cascade.min_confidence)
    tau = {k: round(v, model.rounding) if isinstance(v, float) and math.isfinite(v) else v for k, v in tau.items()}
    c1, c_all, source = plan["cost_per_pair"], plan["full_cost_per_pair"], plan["cost_source"]   # the same rows
    # stage 2 on its own, prefilling its prompts' shared prefixes again (a generative stage 2, a batch-invariant
    # run, the naive engine):
    # given stage 1's runs, it runs neither the sources stage 1 keeps (free_sources) nor what is read from them
    sources = plan["expert_sources"]
    ran = set(stage1) | {sources[e] for e in stage1 if e in sources}
    c2 = subset_cost(plan["expert_costs"], [e for e in experts if e not in ran and sources.get(e) not in ran],
                     sources, SharedPrefill.from_json(plan.get("shared_prefill")))
    # a stage that generates text keeps and reads no prefix KV (bank/prefix_store.worth_keeping): stage 2
    # then prefills its prompts' shared prefixes again, wherever it runs
    reads = not generating(rows, experts)
    open_ = 1.0 - tau["cv_exit_rate"]
    expected = c1 + open_ * ((c_all - c1) if reads else c2)
    if not math.isfinite(tau["tau"]):
        log.warning("cascade: no exit shown safe on the non-test rows (tolerance %g, z %g): tau = inf, every pair "
                    "runs both stages", cascade.tolerance, cascade.noise_z)
    if expected > c_all * (1 + 1e-9):       # dearer and no more accurate: the full head alone is deployed
        log.warning("cascade: expected to cost %.1f per pair, more than the full head's %.1f: %.1f%% of the non-test "
                    "pairs exit (CV), too few to pay for stage 2 prefilling the prompt prefixes stage 1 did (a stage "
                    "generates text, so no prefix KV is kept between them); no cascade added, the full head is "
                    "deployed alone", expected, c_all, 100 * tau["cv_exit_rate"])
        return {**full_art, "cascade_declined": {
            "reason": "expected cost above the full head's", "stage1_experts": stage1,
            "cv_exit_rate": tau["cv_exit_rate"], "full_cv_accuracy": tau["full_cv_accuracy"],
            "expected_cost_per_pair": expected, "full_cost_per_pair": c_all,
            "cheap_budget": cascade.cheap_budget, "tolerance": cascade.tolerance}}
    art = dict(full_art)
    art["cascade"] = {
        "stage1": head1.to_json(), "stage1_experts": stage1, "tau": tau["tau"] if math.isfinite(tau["tau"]) else 1e308,
        "tolerance": cascade.tolerance, "noise_z": cascade.noise_z, "min_confidence": cascade.min_confidence,
        "cheap_budget": cascade.cheap_budget,
        "stage1_lambda": info1["lambda"], "cv": {**tau, "tau": tau["tau"] if math.isfinite(tau["tau"]) else None},
        "nested": plan["nested"], "cost_source": source, "stage1_cost_per_pair": c1, "full_cost_per_pair": c_all,
        "expected_cost_per_pair": expected, "stage2_reads_stage1_prefixes": reads,
        "stage2_alone_cost_per_pair": c2,
        "expected_cost_per_pair_prefilled_again": c1 + open_ * c2,
        "rule": "exit iff round(|s1|, 9) >= tau; tau >= min_confidence; exits grow from the most confident "
                "pairs while, on nested out-of-fold scores of the non-test rows, min(wins - losses, 0) / N - "
                "z sqrt(wins + losses) / N >= -tolerance against the full stack; inf when none is shown"}
    return art


PER_EXPERT_META = ("expert_cost", "generation")    # {expert: ...}: a merged record holds both stages'
SUMMED_META = ("tokens_prefilled", "tokens_naive")  # what each stage's prompts cost: the pair's is the sum


def merge(first, second):
    """One record from a pair's two stage runs: the second stage's experts added, their per-expert meta
    (costs, generation settings) beside the first's, and the prompt token counts summed."""
    meta = {**first.meta, **second.meta}
    for key in PER_EXPERT_META:
        both = {**(first.meta.get(key) or {}), **(second.meta.get(key) or {})}
        meta.pop(key, None)
        if both:
            meta[key] = both
    for key in SUMMED_META + ("prefill_shared",):          # numbers summed, lists (of disjoint experts) joined
        if key in first.meta and key in second.meta:
            meta[key] = first.meta[key] + second.meta[key]
    return replace(first, experts={**first.experts, **second.experts}, meta=meta)


def stage1_head(art: dict) -> CascadeHead:
    c = art["cascade"]
    return CascadeHead(StackHead.from_json(c["stage1"]), None, float(c["tau"]))


def stage1_run(art: dict, free: Callable | None = None) -> list[str]:
    """The experts stage 1 runs: its own, and those free with them (free(experts)) that the full head uses."""
    stage1 = list(art["cascade"]["stage1_experts"])
    return [e for e in (free(stage1) if free else stage1) if e in stage1 or e in art["experts"]]


def run_staged(art: dict, pairs: Sequence, run: Callable, free: Callable | None = None,
               keep: Callable | None = None, *, report: bool = True) -> tuple[list, dict]:
    """run(pairs, experts, given=None) -> Signals per pair (the bank). Stage 1 on every pair, stage 2,
    batched, on the pairs that did not exit -> (records, report: pairs, exited, exit fraction, tokens per
    pair). Stage 2 runs only the experts stage 1's records lack (a native verdict came with its
    generative expert), and is given those records' runs: a derived expert reads its source there.
    free(experts): those plus the ones whose runs come free with them (bank/runner.free_sources): stage 1
    keeps the ones the full head uses, so stage 2 does not compute them again (direct after PriDe).
    keep(): a context manager around both stages that yields a store of prompt-prefix KV or None
    (bank/prefix_store.keeping): stage 2's calls read the open pairs' prefixes stage 1 computed.
    The pairs run in parts whose prefixes the store holds together (PrefixStore.parts: one part
    when everything fits or there is no store), both stages per part, so no open pair's prefix was
    dropped for want of room before stage 2 reads it.
    report=False: the report is returned, not logged (a caller running chunk by chunk logs its own)."""
    pairs, head = list(pairs), stage1_head(art)
    out, exits = [None] * len(pairs), np.zeros(len(pairs), bool)
    with keep() if keep else contextlib.nullcontext() as store:
        for k, part in enumerate(store.parts(pairs) if store is not None else [range(len(pairs))]):
            if k:
                store.reset()
            recs, ex = _stages(art, head, [pairs[i] for i in part], run, free, store)
            for i, r, e in zip(part, recs, ex):
                out[i], exits[i] = r, e
    stats = staged_report(out, exits)
    if report:
        log_staged(stats)
    return out, stats


def _stages(art: dict, head: CascadeHead, pairs: list, run: Callable, free, store) -> tuple[list, np.ndarray]:
    """Stage 1 on the pairs, stage 2 on those that did not exit -> (records, exits)."""
    c = art["cascade"]
    first = run(pairs, stage1_run(art, free))
    exits = head.exits(first) if first else np.zeros(0, bool)
    todo = [i for i, e in enumerate(exits) if not e]
    have = set.intersection(*(set(first[i].experts) for i in todo)) if todo else set()
    rest = [e for e in art["experts"] if e not in c["stage1_experts"] and e not in have]
    out = list(first)
    if store is not None:
        store.only([pairs[i] for i in todo] if rest else [])
    if todo and rest:
        for i, rec in zip(todo, run([pairs[i] for i in todo], rest, given=[first[i].experts for i in todo])):
            out[i] = merge(first[i], rec)
    return out, exits


def log_staged(report: dict) -> None:
    log.info("cascade: %d of %d pairs exited after stage 1 (%.1f%%); %.1f tokens decoded, %.1f prefilled "
             "per pair", report["exited"], report["pairs"], 100 * report["exit_fraction"],
             report["tokens_decoded_per_pair"], report["tokens_prefilled_per_pair"])


def staged_report(records: Sequence, exits: np.ndarray) -> dict:
    n = max(len(records), 1)
    cost = [c for r in records for c in (r.meta.get("expert_cost") or {}).values()]
    return {"pairs": len(records), "exited": int(np.sum(exits)), "exit_fraction": float(np.sum(exits)) / n,
            "tokens_decoded_per_pair": sum(float(c.get("decoded", 0)) for c in cost) / n,
            "tokens_prefilled_per_pair": sum(float(c.get("prefilled", 0)) for c in cost) / n}
