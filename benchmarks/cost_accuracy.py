"""Accuracy vs cost on the public expert banks (and the runtime bank): pruning under a budget, early exit, transfer.

    python benchmarks/cost_accuracy.py [--data ROOT] [--splits 3] [--head stack|auto] [--only NAME] [--plot PNG]
    python benchmarks/cost_accuracy.py --only Runtime [--runtime-pairs 40] [--runtime-tokens 16]

Per condition (benchmark x backbone) and seeded id-hash split (`SplitSpec(seed="cost-<i>")`):
the full head, the pruned head at 1/3 and 1/2 of the full bank's cost (selection/budget.py)
and the cascade (cheap stage at 1/3, nested CV tolerance 0; selection/cascade.py), each with CV
accuracy on non-test rows and accuracy on the test rows (a score of exactly 0 counts half).
Costs: LLMBar's kept texts (io/adapters/costs.py); JudgeBench keeps none, so one unit per
expert. Leave-one-backbone-out transfer (selection/transfer.py): heads fitted on the other
backbones' non-test rows (each on the experts it shares with the held-out backbone: a head may
use fewer experts than the target has, as `fit --transfer-from` allows) pooled without
labels, scored on the held-out backbone's test rows (the same pairs' non-test labels fitted
the sources, so only test rows are fair), vs majority vote of the experts and mean z~.
--head stack (default) fits the stack (Eq. 6) for every head, fast; --head auto runs the gates
(`fit_condition`, slower). --per-subset prunes per pair subset (`fit --budget B --per-subset`,
selection/allocation.py; the test cost is then each subset's experts on its test pairs); --budgets and
--parts choose what runs. Table to stderr, ONE JSON line (the per-target summary) to stdout.

--runtime-bank (or --only Runtime) adds the runtime bank (cost_runtime.py): the whole bank
(`--experts all`, --runtime-tokens per generation) run by the anchor model of random_judge.py on the
first --runtime-pairs pairs of the LLMBar Natural sample the demo ships, signals cached in
--runtime-cache. That model has RANDOM WEIGHTS: its accuracies are near chance and say nothing;
only the cost side of its rows is informative. Its costs are the ones the runtime measured per
pair and expert (meta.expert_cost, prefilled + decoded tokens), so its table shows the full bank's
cost, each budget's chosen subset and cost and the cascade's exit fraction and decoded tokens per
pair in tokens (the cascade's figures from selection/cascade.run_staged replayed on the recorded
signals). It is kept out of the public banks' targets (summary key `runtime_bank`).
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cost_runtime  # noqa: E402  (benchmarks/: the runtime bank's source)

SOURCES = (("LLMBar-Natural", "llmbar", "llmbar_natural/LLMBar/Natural"),
           ("LLMBar-CaseStudy", "llmbar", "llmbar_casestudy/CaseStudy"),
           ("LLMBar-Processed", "llmbar", "llmbar_processed/Processed"),
           ("JudgeBench-GPT-4o", "judgebench", "judgebench_gpt4o"))
BUDGETS = ("0.3333", "0.5")


def data_root(arg: str | None) -> Path:
    """--data, else the shared data root every benchmark reads (robustness.default_root)."""
    from robustness import default_root
    return Path(arg) if arg else default_root()


def bank_sources(root: Path, only: str | None) -> list[tuple]:
    """The SOURCES on disk under root that --only picks (robustness.wanted: case-insensitive, on the
    benchmark's name followed by "/", so `Natural` and `natural/` both pick LLMBar-Natural)."""
    from robustness import on_disk, wanted
    found = on_disk(root, [folder for _, _, folder in SOURCES])
    return [s for s in SOURCES if s[2] in found and wanted(only, s[0] + "/")]


def no_cells(root: Path, only: str | None, what: str = "condition") -> SystemExit:
    """The one-line error of a study over SOURCES with no cell to run (robustness.no_cells)."""
    import robustness
    return robustness.no_cells(root, [folder for _, _, folder in SOURCES], only, what)


def iter_cells(root: Path, only: str | None, first: int, splits: int):
    """(condition name, signals, SplitSpec, i) for every public bank condition x split `cost-<i>`,
    i = first .. first + splits - 1, in the order this benchmark runs them (banks not on disk skipped)."""
    from baer_fast.io.adapters import load
    from baer_fast.io.splits import SplitSpec
    for bench, kind, folder in bank_sources(root, only):
        banks = load(kind, str(root / folder)).banks
        for i in range(first, first + splits):
            for backbone in sorted(banks):
                yield f"{bench}/{backbone}", banks[backbone], SplitSpec(seed=f"cost-{i}"), i


def study_arguments(description: str) -> argparse.ArgumentParser:
    """The options the pruning studies share (prune_ceiling.py, prune_single_order.py)."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--data", help="data root (default: $BAER_SHARED_DATA, else ../shared/data)")
    ap.add_argument("--splits", type=int, default=5, help="seeded splits cost-<i> per condition (default 5)")
    ap.add_argument("--first", type=int, default=0, help="index of the first split (default 0)")
    ap.add_argument("--budget", type=float, default=1 / 3, help="cost budget, a fraction of the full bank's (default 1/3)")
    ap.add_argument("--only", metavar="SUBSTR",
                    help="only the sources whose name contains SUBSTR (case-insensitive: Natural, natural/)")
    return ap


def gap_figures(gaps) -> dict:
    """Test-accuracy gaps (points) of a study's cells -> cells, mean, worst, cells more than 3 points below."""
    gaps = np.asarray(gaps, dtype=np.float64)
    if not len(gaps):
        return {"cells": 0}
    return {"cells": len(gaps), "mean_gap_points": float(gaps.mean()), "worst_gap_points": float(gaps.min()),
            "cells_below_minus_3": int(np.sum(gaps < -3 - 1e-9))}


def ups_downs(pairs) -> tuple[int, int]:
    """(cells where a beats b, cells where b beats a) over (a, b) test accuracies."""
    return sum(a > b + 1e-12 for a, b in pairs), sum(a < b - 1e-12 for a, b in pairs)


def accuracy(scores, records) -> float:
    """Eq. 1 on labelled records, a score of exactly 0 at half credit (eval.metrics.head_native_credit)."""
    from baer_fast.eval.metrics import head_native_credit, label_signs
    return float(np.mean(head_native_credit(scores, label_signs(records))))


def test_rows(records, spec):
    from baer_fast.io.splits import roles
    return [r for r, role in zip(records, roles(records, spec)) if role == "test" and r.label in ("a", "b")]


def stack_art(records, spec, experts, condition: str) -> dict:
    """A minimal artifact around the stack fitted on the non-test rows (what --head stack deploys)."""
    from baer_fast.selection.budget import fit_stack
    from baer_fast.selection.budget import labelled_rows, restrict
    rows, roles, y = labelled_rows(restrict(records, experts), spec)
    head, _ = fit_stack(rows, y, roles, experts=sorted(experts), categories=sorted({r.subset for r in rows}))
    return {"condition": condition, "head": "stack", "experts": sorted(experts), "heads": {"stack": head.to_json()}}


def fit_full(records, spec, mode: str, condition: str) -> dict:
    if mode == "stack":
        return stack_art(records, spec, sorted({k for r in records for k in r.experts}), condition)
    from baer_fast.selection.fit import fit_condition
    return fit_condition(records, condition=condition, spec=spec)


MODEL = None         # CostModel of the run (--criterion)
TOLERANCE = 0.0      # the cascade's CV tolerance (--tolerance)
PARTS = ("pruned", "cascade", "transfer")     # what to run (--parts)
SPACE = None         # the budget search's space_for (--per-subset: selection/allocation.space_for)


def fit_pruned(records, spec, budget: str, mode: str, condition: str) -> dict:
    from baer_fast.heads.allocation import allocate
    from baer_fast.selection.budget import fit_budget, plan_budget
    if mode == "stack":
        plan = plan_budget(records, budget, spec=spec, model=MODEL, space_for=SPACE)
        alloc = plan.get("allocation")
        art = stack_art(allocate(records, alloc, plan["experts"]) if alloc else records, spec, plan["experts"], condition)
        art.update(budget=plan, **({"allocation": alloc} if alloc else {}))
        return art
    return fit_budget(records, budget, condition=condition, spec=spec, model=MODEL, space_for=SPACE)


def priced(records, costs: dict, experts) -> float:
    """Cost per pair of running `experts`: their recorded costs, plus (runtime banks) the parts of prompt
    nodes shared with experts left out (selection/costs.subset_cost); a plain sum on imported banks."""
    from baer_fast.selection.costs import shared_costs, subset_cost
    return subset_cost(costs, list(experts), None, shared_costs(records))


def test_cost(records, experts, full_experts, allocation: dict | None = None) -> float:
    """Cost per pair of `experts` (or, per subset, of each subset's `allocation`) over the full bank's."""
    from baer_fast.heads.allocation import experts_for
    from baer_fast.selection.budget import expert_costs
    if allocation is None:
        costs, _ = expert_costs(records, full_experts)
        return priced(records, costs, experts) / max(priced(records, costs, full_experts), 1e-12)
    spent = full = 0.0
    for g in sorted({r.subset for r in records}):
        in_g = [r for r in records if r.subset == g]
        costs, _ = expert_costs(in_g, full_experts)
        spent += len(in_g) * priced(in_g, costs, experts_for(allocation, experts, g))
        full += len(in_g) * priced(in_g, costs, full_experts)
    return spent / max(full, 1e-12)


def decoded_per_pair(records, experts) -> float:
    """Mean tokens generated per pair by `experts` on `records` (meta.expert_cost; 0 where none)."""
    keep = set(experts)
    return sum(float(c.get("decoded", 0)) for r in records for k, c in (r.meta.get("expert_cost") or {}).items()
               if k in keep) / max(len(records), 1)


def units(test, experts, costs: dict) -> dict:
    """Cost per pair of `experts` in the bank's own units (test rows): tokens where recorded, else experts."""
    return {"per_pair": priced(test, costs, experts), "decoded": decoded_per_pair(test, experts)}


def run_condition(bench: str, backbone: str, records, spec, mode: str, replay=None) -> dict:
    """One condition x split. replay(reads=...): run(pairs, experts) from the recorded signals (the runtime
    bank), so the cascade's exit fraction and tokens per pair come from selection/cascade.run_staged's own
    report, stage 2 reading stage 1's prompt prefixes or not as the artifact says the runtime does."""
    from baer_fast.artifact import deployed_head
    from baer_fast.selection.budget import expert_costs
    from baer_fast.selection.cascade import CascadeSpec, fit_cascade
    name = f"{bench}/{backbone}"
    test = test_rows(records, spec)
    everyone = sorted({k for r in records for k in r.experts})
    costs, source = expert_costs(test, everyone)
    full = fit_full(records, spec, mode, name)
    row = {"condition": name, "split": spec.seed, "n_test": len(test), "experts": len(everyone), "costs": source,
           "full": {"test": accuracy(deployed_head(full).score(test), test), "cost": 1.0,
                    **units(test, everyone, costs)}}
    for b in BUDGETS if "pruned" in PARTS else ():
        try:
            art = fit_pruned(records, spec, b, mode, name)
        except Exception as e:          # an infeasible budget (no single expert that cheap) is reported, not hidden
            row[f"pruned_{b}"] = {"infeasible": str(e)}
            continue
        plan = art["budget"]
        row["full"]["cv"] = plan["full_cv_accuracy"]
        n = plan.get("nested") or {}
        row[f"pruned_{b}"] = {"test": accuracy(deployed_head(art).score(test), test), "cv": plan["cv_accuracy"],
                              "cost": test_cost(test, plan["experts"], everyone, plan.get("allocation")),
                              "experts": plan["experts"], "allocation": plan.get("allocation"),
                              **units(test, plan["experts"], costs), "plan_cost_per_pair": plan["cost_per_pair"],
                              "plan_full_cost_per_pair": plan["full_cost_per_pair"], "cost_source": plan["cost_source"],
                              **({"runs": units(test, cost_runtime.closure(plan["experts"]), costs)} if replay else {}),
                              "near_full": plan["near_full"], "nested_gap": n.get("gap"),
                              "nested_se": n.get("se"), "nested_near_full": n.get("near_full")}
    if "cascade" not in PARTS:
        return row
    try:
        art = fit_cascade(records, full, spec=spec, cascade=CascadeSpec("0.3333", TOLERANCE), model=MODEL)
    except Exception as e:
        row["cascade"] = {"infeasible": str(e)}
        return row
    if "cascade" not in art:            # none added (logged): the cheap stage held every expert, or it cost more
        why = art["cascade_declined"]["reason"]
        if why == "the cheap stage holds every expert":
            row["cascade"] = {"infeasible": why}
        else:                           # what fit --cascade deploys: the full head alone
            row["cascade"] = {**row["full"], "cv": row["full"].get("cv", art["cascade_declined"]["full_cv_accuracy"]),
                              "exit": 0.0, "cv_exit": art["cascade_declined"]["cv_exit_rate"], "tau": None,
                              "declined": why, "stage1": []}
        return row
    head, c = deployed_head(art), art["cascade"]
    exits = head.exits(test)
    # stage 2 reads stage 1's shared prompt prefixes (Judge, single-pass stages): an open pair costs what the
    # full bank does; where a stage generates text, stage 2 prefills them again
    c1, c_all, exited = priced(test, costs, c["stage1_experts"]), priced(test, costs, everyone), float(np.mean(exits))
    rest = [e for e in everyone if e not in c["stage1_experts"]]
    reads = c.get("stage2_reads_stage1_prefixes", True)
    per_pair = c1 + (1 - exited) * ((c_all - c1) if reads else priced(test, costs, rest))
    row["cascade"] = {"test": accuracy(head.score(test), test), "cv": c["cv"]["cv_accuracy"],
                      "exit": exited, "cv_exit": c["cv"]["cv_exit_rate"], "tau": c["cv"]["tau"],
                      "cost": per_pair / c_all, "per_pair": per_pair, "stage2_reads_stage1_prefixes": reads,
                      "decoded": decoded_per_pair(test, c["stage1_experts"]) + decoded_per_pair(
                          [r for r, e in zip(test, exits) if not e], rest) * (1 - exited),
                      "stage1": c["stage1_experts"]}
    if replay is not None:          # what Judge would run and report (stage 2 reads stage 1's prefixes), replayed
        from baer_fast.selection.cascade import run_staged
        _, rep = run_staged(art, test, replay(reads=reads))
        row["cascade"]["runtime_report"] = rep
    return row


def majority(records) -> np.ndarray:
    from baer_fast.features.evidence import evidence, runs_tensor
    experts = sorted({k for r in records for k in r.experts})
    p, _, _, zt = evidence(runs_tensor(records, experts))
    return np.sign(p - 0.5).sum(axis=1), zt.mean(axis=1)


def transfer_rows(bench: str, banks: dict, spec, mode: str) -> list[dict]:
    from baer_fast.artifact import deployed_head
    from baer_fast.selection.budget import restrict
    from baer_fast.selection.transfer import fit_transfer
    out = []
    for held in sorted(banks):
        target = banks[held]
        experts = sorted({k for r in target for k in r.experts})
        arts = []
        for src in sorted(set(banks) - {held}):
            mine = restrict(banks[src], experts)    # the source's head may use only the target's experts
            if not any(r.experts for r in mine):
                continue                # no expert in common
            arts.append((src, fit_full(mine, spec, mode, f"{bench}/{src}")))
        if not arts:
            continue
        art = fit_transfer(target, arts, condition=f"{bench}/{held}")
        test = test_rows(target, spec)
        vote, zbar = majority(test)
        own = fit_full(target, spec, mode, held)
        out.append({"condition": f"{bench}/{held}", "split": spec.seed, "sources": len(arts), "n_test": len(test),
                    "transfer": accuracy(deployed_head(art).score(test), test),
                    "majority": accuracy(vote, test), "mean_zt": accuracy(zbar, test),
                    "supervised": accuracy(deployed_head(own).score(test), test)})
    return out


def summarize(rows: list[dict], lobo: list[dict]) -> dict:
    out = {}
    for key in [f"pruned_{b}" for b in BUDGETS] + ["cascade"]:
        cells = [(r[key], r["full"]) for r in rows if "test" in r.get(key, {})]
        gaps = [100 * (c["test"] - f["test"]) for c, f in cells]
        s = {"cells": len(cells), "infeasible": sum("infeasible" in r.get(key, {}) for r in rows),
             "mean_gap_points": float(np.mean(gaps)) if gaps else None,
             "worst_gap_points": float(np.min(gaps)) if gaps else None,
             "mean_cost_fraction": float(np.mean([c["cost"] for c, _ in cells])) if cells else None,
             "mean_cv_gap_points": float(np.mean([100 * (c["cv"] - f.get("cv", c["cv"])) for c, f in cells]))
             if cells else None}
        if key == "cascade":
            s["mean_exit"] = float(np.mean([c["exit"] for c, _ in cells])) if cells else None
            s["no_exit_cells"] = sum(c["tau"] is None for c, _ in cells)
        else:       # does the plan's own verdict (nested CV: within noise of the full stack?) predict test?
            for flag in (True, False):
                g = [gap for gap, (c, _) in zip(gaps, cells) if c.get("nested_near_full") is flag]
                s[f"nested_near_{str(flag).lower()}"] = {"cells": len(g), "mean_gap_points": float(np.mean(g))
                                                         if g else None, "worst_gap_points": float(np.min(g))
                                                         if g else None}
            s["mean_nested_gap_points"] = float(np.mean([100 * c["nested_gap"] for c, _ in cells
                                                         if c.get("nested_gap") is not None] or [np.nan]))
        ok = bool(gaps) and s["mean_gap_points"] >= -1 and s["worst_gap_points"] >= -3
        s["target_met"] = ok and (key != "cascade" or s["mean_exit"] >= 0.5)
        out[key] = s
    t = {k: float(np.mean([r[k] for r in lobo])) if lobo else None
         for k in ("transfer", "majority", "mean_zt", "supervised")}
    t["held_out_cells"] = len(lobo)
    t["target_met"] = bool(lobo) and t["transfer"] > t["majority"] and t["transfer"] > t["mean_zt"]
    out["transfer"] = t
    return out


def plot(rows: list[dict], path: str) -> None:
    from baer_fast.eval.report import _figure, _save_png
    fig = _figure(6.0, 4.0)
    ax = fig.add_subplot(1, 1, 1)
    for key, mark in [(f"pruned_{b}", m) for b, m in zip(BUDGETS, "os")] + [("cascade", "^")]:
        cells = [(r[key], r["full"]) for r in rows if "test" in r.get(key, {})]
        ax.scatter([c["cost"] for c, _ in cells], [100 * (c["test"] - f["test"]) for c, f in cells],
                   marker=mark, alpha=0.6, label=key)
    ax.axhline(0, color="grey", lw=1)
    ax.axhline(-1, color="grey", ls="--", lw=1)
    ax.set_xlabel("cost per pair (share of the full bank, test rows)")
    ax.set_ylabel("test accuracy - full head (points)")
    ax.legend(fontsize=8)
    _save_png(fig, path)


def plot_transfer(lobo: list[dict], path: str) -> None:
    from baer_fast.eval.report import _figure, _save_png
    fig = _figure(7.0, 3.6)
    ax = fig.add_subplot(1, 1, 1)
    names = sorted({t["condition"] for t in lobo})
    x = np.arange(len(names))
    for k, (key, label) in enumerate((("transfer", "pooled transfer"), ("majority", "majority vote"),
                                      ("mean_zt", "mean z~"), ("supervised", "supervised (own labels)"))):
        vals = [100 * np.mean([t[key] for t in lobo if t["condition"] == n]) for n in names]
        ax.bar(x + 0.2 * (k - 1.5), vals, width=0.2, label=label)
    ax.set_xticks(x, [n.split("/", 1)[1] + "\n" + n.split("/")[0].replace("LLMBar-", "") for n in names],
                  fontsize=6, rotation=90)
    ax.set_ylabel("held-out test accuracy (%)")
    ax.legend(fontsize=7)
    _save_png(fig, path)


def write_report(out_dir: str, rows: list[dict], lobo: list[dict], summary: dict) -> None:
    """A page of its own beside the eval report: the two figures and the per-target summary."""
    import html
    from baer_fast.io.jsonl import atomic_open
    os.makedirs(out_dir, exist_ok=True)
    plot(rows, os.path.join(out_dir, "cost_accuracy.png"))
    plot_transfer(lobo, os.path.join(out_dir, "cost_transfer.png"))
    cells = "".join(f"<tr><td>{html.escape(k)}</td><td>{html.escape(json.dumps(v))}</td></tr>"
                    for k, v in summary.items())
    page = ("<!doctype html><meta charset='utf-8'><title>baer-fast: accuracy vs cost</title>"
            "<h1>Accuracy vs cost (benchmarks/cost_accuracy.py)</h1>"
            "<p>Pruned heads and the cascade: test accuracy minus the full head's, against cost.</p>"
            "<img src='cost_accuracy.png' alt='accuracy gap vs cost'>"
            "<p>Leave-one-backbone-out transfer vs label-free baselines.</p>"
            "<img src='cost_transfer.png' alt='transfer accuracy per held-out backbone'>"
            f"<h2>Summary</h2><table border='1'>{cells}</table>")
    with atomic_open(os.path.join(out_dir, "cost.html")) as fh:
        fh.write(page)


def runtime_rows(args) -> list[dict]:
    """The runtime bank (cost_runtime.py) over the seeded splits: measured costs through pruning and the cascade."""
    from baer_fast.io.splits import SplitSpec
    records = cost_runtime.runtime_records(args.runtime_cache, n_pairs=args.runtime_pairs,
                                           max_new_tokens=args.runtime_tokens)
    rows = [run_condition(cost_runtime.NAME, "anchor-random-weights", records, SplitSpec(seed=f"cost-{i}"),
                          args.head, replay=functools.partial(cost_runtime.replay, records))
            for i in range(args.first_split, args.first_split + args.splits)]
    print_runtime(rows, records, args)
    return rows


def print_runtime(rows: list[dict], records, args) -> None:
    from baer_fast.selection.budget import expert_costs
    everyone = sorted({k for r in records for k in r.experts})
    costs, source = expert_costs(records, everyone)
    dec = {e: decoded_per_pair(records, [e]) for e in everyone}
    p = functools.partial(print, file=sys.stderr)
    p(f"\n{cost_runtime.NAME}: `baer-fast experts --experts all` by the anchor model with RANDOM WEIGHTS on "
      f"{len(records)} LLMBar Natural sample pairs, {args.runtime_tokens}-token generations.\nIts accuracies are "
      "near chance by construction; only the cost columns are informative. Costs: measured by the runtime "
      f"(meta.expert_cost, source '{source}'), tokens per pair = prefilled + decoded.")
    p("per-expert cost, tokens/pair (decoded), all pairs: " + ", ".join(
        f"{e} {costs[e]:.0f} ({dec[e]:.0f})" for e in sorted(everyone, key=lambda e: (-costs[e], e))))
    p("tok/pair: cost per pair as the budget search adds it up (test rows); share: of the full bank's; run tok, "
      "dec: what the runtime runs for those experts (a native expert needs its generative one, PriDe needs "
      "direct's prompts), all tokens and decoded ones, per pair; the cascade's from run_staged's own report")
    p(f"{'split':<7} {'head':<11} {'tok/pair':>8} {'share':>6} {'run tok':>8} {'dec':>6} {'exit':>5} {'test':>5} "
      f"{'cv':>5}  experts")
    for r in rows:
        for key, label in (("full", "full"), ("pruned_0.3333", "pruned 1/3"), ("pruned_0.5", "pruned 1/2"),
                           ("cascade", "cascade")):
            c = r.get(key) or {}
            if "test" not in c:
                p(f"{r['split']:<7} {label:<11} {c.get('infeasible', 'not run')}")
                continue
            run_tok, dec = runtime_cost(c)
            out = f"{c['exit']:.2f}" if "exit" in c else ""
            names = c.get("experts") or (["stage 1:"] + c["stage1"] if c.get("stage1") else [f"all {r['experts']}"])
            if "declined" in c:
                names = [f"none added ({c['declined']}): the full head,"] + names
            p(f"{r['split']:<7} {label:<11} {c['per_pair']:8.0f} {c['cost']:6.2f} {run_tok:8.0f} {dec:6.1f} {out:>5} "
              f"{100 * c['test']:5.1f} {100 * c['cv'] if 'cv' in c else float('nan'):5.1f}  {' '.join(names)}")


def runtime_cost(cell: dict) -> tuple[float, float]:
    """(tokens, decoded tokens) per pair the runtime runs for a cell (see print_runtime)."""
    if "runtime_report" in cell:
        rep = cell["runtime_report"]
        return rep["tokens_prefilled_per_pair"] + rep["tokens_decoded_per_pair"], rep["tokens_decoded_per_pair"]
    runs = cell.get("runs") or cell
    return runs["per_pair"], runs["decoded"]


def runtime_summary(rows: list[dict]) -> dict:
    def mean(key, field):
        vals = [r[key][field] for r in rows if field in r.get(key, {})]
        return float(np.mean(vals)) if vals else None
    out = {"note": "random-weight judge: accuracies near chance; only the costs are informative",
           "splits": len(rows), "full_tokens_per_pair": mean("full", "per_pair"),
           "full_decoded_per_pair": mean("full", "decoded")}
    for key in [f"pruned_{b}" for b in BUDGETS] + ["cascade"]:
        cells = [r[key] for r in rows if "test" in r.get(key, {})]
        out[key] = {f: mean(key, f) for f in ("per_pair", "cost", "decoded", "test")}
        out[key].update(cells=len(cells), run_tokens_per_pair=float(np.mean([runtime_cost(c)[0] for c in cells]))
                        if cells else None, run_decoded_per_pair=float(np.mean([runtime_cost(c)[1] for c in cells]))
                        if cells else None)
    out["cascade"]["exit"] = mean("cascade", "exit")
    return out


def main(argv=None) -> int:
    global MODEL, TOLERANCE, PARTS, SPACE, BUDGETS
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=None)
    ap.add_argument("--splits", type=int, default=3)
    ap.add_argument("--first-split", type=int, default=0, help="seeds cost-K .. cost-(K + splits - 1)")
    ap.add_argument("--head", choices=("stack", "auto"), default="stack")
    ap.add_argument("--plot", default=None)
    ap.add_argument("--report", default=None, metavar="DIR", help="write cost.html + PNGs there")
    ap.add_argument("--criterion", choices=("accuracy", "logloss"), default="logloss",
                    help="what the subset search maximises first (CostModel.criterion)")
    ap.add_argument("--tolerance", type=float, default=None, help="cascade CV tolerance (default: CascadeSpec's)")
    ap.add_argument("--only", default=None, metavar="NAME",
                    help="only the sources whose name contains NAME (case-insensitive: Natural, natural/)")
    ap.add_argument("--parts", default=",".join(PARTS), help="comma-separated subset of pruned,cascade,transfer")
    ap.add_argument("--per-subset", action="store_true", help="prune per pair subset (`fit --budget B --per-subset`)")
    ap.add_argument("--budgets", default=",".join(BUDGETS), help="comma-separated fractions for the pruned heads")
    ap.add_argument("--rows", default=None, metavar="JSON", help="write every cell (and transfer cell) there")
    ap.add_argument("--runtime-bank", action="store_true",
                    help=f"also run {cost_runtime.NAME} (also chosen by --only Runtime): the whole runtime bank of "
                         "a RANDOM-weight judge, measured costs (accuracies near chance)")
    ap.add_argument("--runtime-cache", default=os.path.join(tempfile.gettempdir(), "baer-cost-runtime"),
                    metavar="DIR", help="the runtime bank's signals (and model) are kept there; reruns skip the model")
    ap.add_argument("--runtime-pairs", type=int, default=40,
                    help="the first N pairs of the 100-pair sample (40: 4.4 min of model time on one thread at load "
                         "average 1-3, 9.3 min at 3-6)")
    ap.add_argument("--runtime-tokens", type=int, default=16, help="generation budget of every generative expert")
    args = ap.parse_args(argv)
    from baer_fast.selection.budget import CostModel
    from baer_fast.selection.cascade import CascadeSpec
    MODEL = CostModel(criterion=args.criterion)
    PARTS = tuple(p for p in args.parts.split(",") if p)
    BUDGETS = tuple(b for b in args.budgets.split(",") if b)
    if args.per_subset:
        from baer_fast.selection.allocation import space_for
        SPACE = space_for
    TOLERANCE = CascadeSpec().tolerance if args.tolerance is None else args.tolerance
    from baer_fast.io.adapters import load
    from baer_fast.io.splits import SplitSpec
    root = data_root(args.data)
    rows, lobo = [], []
    for bench, kind, folder in bank_sources(root, args.only):
        banks = load(kind, str(root / folder)).banks
        for i in range(args.first_split, args.first_split + args.splits):
            spec = SplitSpec(seed=f"cost-{i}")
            for backbone in sorted(banks):
                r = run_condition(bench, backbone, banks[backbone], spec, args.head)
                rows.append(r)
                cells = " ".join(f"{k}={100 * r[k]['test']:.1f}@{r[k]['cost']:.2f}" for k in r
                                 if isinstance(r[k], dict) and "test" in r[k])
                print(f"{r['condition']:<30} {spec.seed} {cells}", file=sys.stderr)
            if len(banks) > 1 and "transfer" in PARTS:
                for t in transfer_rows(bench, banks, spec, args.head):
                    lobo.append(t)
                    print(f"{t['condition']:<30} {spec.seed} LOBO transfer={100 * t['transfer']:.1f} "
                          f"majority={100 * t['majority']:.1f} mean_zt={100 * t['mean_zt']:.1f} "
                          f"supervised={100 * t['supervised']:.1f}", file=sys.stderr)
    runtime = runtime_rows(args) if args.runtime_bank or (args.only and args.only.lower() in cost_runtime.NAME.lower()) \
        else []
    if not (rows or lobo or runtime):
        raise no_cells(root, args.only)
    if args.plot:
        plot(rows, args.plot)
    summary = summarize(rows, lobo) if rows or lobo else {}      # no public bank run: no targets to judge
    if runtime:
        summary["runtime_bank"] = runtime_summary(runtime)
    if args.report:
        write_report(args.report, rows, lobo, summary)
    if args.rows:
        with open(args.rows, "w", encoding="utf-8") as fh:
            json.dump({"cells": rows, "transfer": lobo, "runtime": runtime}, fh, indent=1)
    print(json.dumps({"benchmark": "cost_accuracy", "head": args.head, "splits": args.splits,
                      "first_split": args.first_split,
                      "criterion": args.criterion, "cascade_tolerance": TOLERANCE,
                      "conditions": len({r["condition"] for r in rows}), "runtime_splits": len(runtime),
                      "summary": summary}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
