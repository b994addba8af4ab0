"""`baer-fast frontier --signals S [--budget B] [--plot out.png]`: CV accuracy vs cost of expert subsets.

Prints every subset the budget search visits (selection/budget.py) with its cost per pair,
its share of the full bank's and its CV accuracy on non-test rows, marking the one chosen
at --budget and whether it is within noise of the full stack (also nested: the search run inside
each outer training fold); --plot draws them. Also home of the cost options `fit` takes (`add_fit_arguments`,
`cost_fit`): --budget, --per-subset, --cascade, --costs, --transfer-from.
"""
from __future__ import annotations

import logging

from baer_fast.errors import InputError

log = logging.getLogger("baer_fast")


def add_arguments(p) -> None:
    from baer_fast.io.rejects import add_on_error_argument
    p.add_argument("--signals", nargs="+", required=True, help="signals JSONL file(s) of ONE condition")
    p.add_argument("--budget", default="1/3", help="fraction of the full bank's cost (0.33 or 1/3), or tokens=N "
                   "(default 1/3: one expert of three equal ones fits, as it does not under 0.33)")
    p.add_argument("--costs", default=None, metavar="FILE", help="JSON {expert: tokens per pair} (overrides meta)")
    p.add_argument("--split-seed", default="baer-v1", help="salt of the id-hash split (default: baer-v1)")
    p.add_argument("--plot", default=None, metavar="PNG", help="write the frontier as a PNG")
    p.add_argument("--per-subset", action="store_true", help="search expert sets per pair subset (`fit --per-subset`)")
    add_on_error_argument(p, "<plot>.rejects.jsonl, or frontier.rejects.jsonl without --plot")


def add_fit_arguments(p) -> None:
    """The cost options of `baer-fast fit` (docs/cost.md)."""
    p.add_argument("--budget", default=None, help="prune the bank to this cost: a fraction of the full "
                   "bank's (e.g. 0.33 or 1/3) or tokens=N per pair; the subset is chosen by CV on non-test rows. A fixed "
                   "subset may cost accuracy; fit prints what nested CV expects it to lose")
    p.add_argument("--per-subset", action="store_true", help="with --budget: choose the experts per pair subset "
                   "(the budget holds on average over the pairs; a subset unseen in training runs every chosen expert)")
    p.add_argument("--cascade", action="store_true", help="add an early-exit stage: cheap experts first, the rest "
                   "only for the pairs they are unsure of, holding CV accuracy to the full head's "
                   "(--cascade-tolerance)")
    p.add_argument("--cascade-budget", default=None, help="with --cascade: cost of the cheap stage (default 1/3)")
    p.add_argument("--cascade-tolerance", type=float, default=None,
                   help="with --cascade: CV accuracy (a fraction) the exits may cost against the full stack, one standard error "
                        "of fold noise included (default 0.01); tau = inf when no exit is shown within it")
    p.add_argument("--costs", default=None, metavar="FILE", help="JSON {expert: tokens per pair} (overrides meta)")
    p.add_argument("--transfer-from", nargs="+", default=None, metavar="HEAD",
                   help="unlabelled signals: deploy a pooled head from these artifacts (or folders of them)")


def check_fit_options(args) -> None:
    """Options that would be ignored or write a nameless artifact are errors before any work."""
    if not args.condition.strip():
        raise InputError("must not be empty: it names the condition (benchmark x backbone) in the artifact",
                         field="--condition")
    for flag, val in (("--cascade-budget", args.cascade_budget), ("--cascade-tolerance", args.cascade_tolerance)):
        if val is not None and not args.cascade:
            raise InputError("only has an effect with --cascade", field=flag)
    if args.transfer_from and (args.budget or args.cascade or args.per_subset):
        raise InputError("deploys a pooled head of other conditions' heads; it does not combine with --budget, "
                         "--per-subset or --cascade", field="--transfer-from")
    if args.transfer_from and getattr(args, "head", "auto") != "auto":
        raise InputError(f"deploys a pooled head of other conditions' heads; --head {args.head} would be ignored "
                         "(choose the members' heads when fitting them)", field="--transfer-from")
    tol = args.cascade_tolerance
    if tol is not None and not 0 <= tol < 1:         # nan and inf fail too
        raise InputError(f"expected the CV accuracy the exits may cost as a fraction in [0, 1), e.g. 0.01 for one "
                         f"point (got {tol:g})", field="--cascade-tolerance")
    if args.costs and not (args.budget or args.cascade):
        raise InputError("prices the experts for --budget or --cascade; without either it has no effect",
                         field="--costs")


def fit_kwargs(args) -> dict:
    """`fit`'s options as `fit_condition` keywords (the plain fit and the budget fit alike)."""
    from baer_fast.io.splits import SplitSpec
    return dict(condition=args.condition, spec=SplitSpec(seed=args.split_seed), head=args.head,
                reference_expert=args.reference_expert, pointwise_expert=args.pointwise_expert,
                internal=getattr(args, "internal", ()), tiebreak=not getattr(args, "no_tiebreak", False))


def cost_fit(args, records) -> dict | None:
    """The artifact `fit` writes when a cost option is given; None otherwise."""
    if getattr(args, "transfer_from", None):
        from baer_fast import artifact
        from baer_fast.selection.transfer import fit_transfer, head_paths
        arts = [(path, artifact.load(path)) for path in head_paths(args.transfer_from, args.out)]
        return fit_transfer(records, arts, condition=args.condition)
    if not (getattr(args, "budget", None) or getattr(args, "cascade", False)):
        if getattr(args, "per_subset", False):
            raise InputError("--per-subset chooses the experts of --budget per subset: give --budget", field="--per-subset")
        return None
    from baer_fast.selection.budget import fit_budget
    from baer_fast.selection.fit import fit_condition
    if args.per_subset and args.cascade:
        raise InputError("--per-subset and --cascade do not combine (a cascade's stages are expert subsets "
                         "for every pair); choose one", field="--per-subset")
    costs = costs_option(args, records)
    kw = fit_kwargs(args)
    spec = kw["spec"]
    art = (fit_budget(records, args.budget, costs_override=costs, space_for=space_option(args), **kw)
           if args.budget else fit_condition(records, **kw))
    if args.cascade:
        from baer_fast.selection.cascade import CascadeSpec, fit_cascade
        art = fit_cascade(records, art, spec=spec, costs_override=costs,
                          cascade=CascadeSpec(**{k: v for k, v in (("cheap_budget", args.cascade_budget),
                                                                   ("tolerance", args.cascade_tolerance)) if v is not None}))
    for line in cost_lines(art):
        print(line)
    return art


def costs_option(args, records) -> dict | None:
    """--costs FILE read, with a warning naming the experts it prices that the signals lack."""
    from baer_fast.selection.costs import read_costs_file
    costs = read_costs_file(args.costs) if args.costs else None
    unknown = sorted(set(costs or ()) - {e for r in records for e in r.experts})
    if unknown:
        log.warning("--costs %s names %s, which the signals do not have (ignored)", args.costs, ", ".join(unknown))
    return costs


def space_option(args):
    """`budget.plan_with_nested`'s space_for of --per-subset (None: one subset for every pair)."""
    if not getattr(args, "per_subset", False):
        return None
    from baer_fast.selection.allocation import space_for
    return space_for


def cost_lines(art: dict) -> list[str]:
    out = []
    if "budget" in art:
        b = art["budget"]
        out.append(f"  budget {b['budget']}: {len(b['experts'])} expert{'s' * (len(b['experts']) != 1)} ({', '.join(b['experts'])}), "
                   f"{b['cost_per_pair']:.1f} of {b['full_cost_per_pair']:.1f} per pair "
                   f"({100 * b['fraction_of_full']:.1f}%, costs: {b['cost_source']}); CV "
                   f"{100 * b['cv_accuracy']:.1f} vs full {100 * b['full_cv_accuracy']:.1f}")
        for g, es in (b.get("allocation") or {}).items():
            out.append(f"    subset {g} ({100 * b['subset_shares'][g]:.0f}% of the rows): {', '.join(es) or 'no expert'}")
        out.extend(noise_lines(b))
    d = art.get("cascade_declined")
    if d:
        out.append(f"  cascade: none added ({d['reason']}; stage 1 would be {', '.join(d['stage1_experts'])})")
    if "cascade" in art:
        c = art["cascade"]
        if c["cv"].get("tau") is None:
            out.append("  cascade: no exit shown safe on the non-test rows: tau = inf, every pair runs both stages")
        out.append(f"  cascade: stage 1 {', '.join(c['stage1_experts'])}, tau {c['tau']:.4g}: CV exit "
                   f"{100 * c['cv']['cv_exit_rate']:.1f}%, CV accuracy {100 * c['cv']['cv_accuracy']:.1f} vs full "
                   f"{100 * c['cv']['full_cv_accuracy']:.1f}; expected cost {c['expected_cost_per_pair']:.1f} of "
                   f"{c['full_cost_per_pair']:.1f} per pair" + again(c))
    return out


def again(c: dict) -> str:
    """Where stage 2 shares prompt prefixes with stage 1: whether the expected cost has it prefill them
    again (a stage generates text), else its cost where it does."""
    if c.get("stage2_reads_stage1_prefixes") is False:
        return " (stage 2 prefills its prompt prefixes again: a stage generates text, so no prefix KV is kept)"
    x = c.get("expected_cost_per_pair_prefilled_again")
    return "" if x is None or x <= c["expected_cost_per_pair"] + 1e-9 else (
        f" ({x:.1f} where stage 2 prefills its shared prompt prefixes again: --batch-invariant, --naive; "
        "single-pass stages otherwise read stage 1's)")


def noise_lines(plan: dict) -> list[str]:
    """Whether the chosen subset is within noise of the full stack, on the search's folds and nested."""
    tol = 100 * plan.get("tolerance", 0.0)
    out = [f"    CV gap to the full stack {100 * plan['cv_gap']:+.1f} +- {100 * plan['cv_gap_se']:.1f} points "
           f"(search folds): {'within' if plan['near_full'] else 'NOT within'} noise of it (tolerance {tol:.1f})"]
    n = plan.get("nested")
    if n:
        out.append(f"    nested CV ({n['repeats']} x {n['folds']}-fold, search inside each training fold): gap "
                   f"{100 * n['gap']:+.1f} +- {100 * n['se']:.1f} points: "
                   f"{'within' if n['near_full'] else 'NOT within'} noise")
    return out


def plot(plan: dict, path: str) -> None:
    from baer_fast.eval.report import _figure, _save_png
    fig = _figure(6.0, 4.0)
    ax = fig.add_subplot(1, 1, 1)
    full = plan["full_cost_per_pair"] or 1.0
    for how, mark in (("forward", "o"), ("backward", "s")):
        pts = [v for v in plan["visited"] if v["found_by"] == how]
        ax.scatter([v["cost"] / full for v in pts], [100 * v["cv_accuracy"] for v in pts], marker=mark,
                   label=f"{how} search", alpha=0.7)
    ax.scatter([plan["fraction_of_full"]], [100 * plan["cv_accuracy"]], s=160, facecolors="none",
               edgecolors="red", label=f"chosen at {plan['budget']}")
    ax.axvline(plan["limit_per_pair"] / full, color="grey", ls="--", lw=1)
    ax.set_xlabel("cost per pair (share of the full bank)")
    ax.set_ylabel("CV accuracy (%)")
    ax.legend(loc="lower right", fontsize=8)
    _save_png(fig, path)


def run(args) -> int:
    from baer_fast.io.records import read_signals_many
    from baer_fast.io.rejects import rejects_for, report_rejects
    from baer_fast.selection.budget import plan_budget
    from baer_fast.selection.fit import check_one_condition
    from baer_fast.io.splits import SplitSpec
    from baer_fast.io.jsonl import check_output

    if args.plot:
        check_output(args.plot, field="--plot")
    rejects = rejects_for(args, out=args.plot or "frontier")
    try:
        records = read_signals_many(args.signals, rejects=rejects)
    finally:
        report_rejects(rejects)
    check_one_condition(records, ",".join(args.signals))
    from baer_fast.errors import located
    with located(args.signals):
        plan = plan_budget(records, args.budget, spec=SplitSpec(seed=args.split_seed),
                           costs_override=costs_option(args, records),
                           space_for=space_option(args))
    full = plan["full_cost_per_pair"] or 1.0
    print(f"full bank: {len(plan['expert_costs'])} experts, {plan['full_cost_per_pair']:.1f} per pair "
          f"(costs: {plan['cost_source']}), CV {100 * plan['full_cv_accuracy']:.1f}")
    print(f"{'':2}{'cost':>10} {'share':>6} {'cv acc':>6}  search    experts")
    chosen = plan.get("moves", plan["experts"])      # per subset: the visited entries name moves
    for v in sorted(plan["visited"], key=lambda v: (v["cost"], v["experts"])):
        mark = "*" if v["experts"] == chosen else " "
        print(f"{mark:2}{v['cost']:10.1f} {100 * v['cost'] / full:5.1f}% {100 * v['cv_accuracy']:5.1f}  "
              f"{v['found_by']:<9} {', '.join(v['experts'])}")
    print(f"* chosen at budget {plan['budget']}: {', '.join(chosen)}")
    print("\n".join(noise_lines(plan)))
    if args.plot:
        plot(plan, args.plot)
        print(f"plot -> {args.plot}")
    return 0
