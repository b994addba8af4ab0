"""`baer-fast fit --signals S... --condition NAME --out head.json [--head auto|stack|route|reference]`.

Fits every head on the non-test rows, selects one through the two gates (or takes the
forced one), writes the artifact and prints the decision.
"""
from __future__ import annotations

import sys


def add_arguments(p) -> None:
    p.add_argument("--signals", nargs="+", required=True, help="signals JSONL file(s) of ONE condition")
    p.add_argument("--condition", required=True, help="condition name (benchmark x backbone) stored in the artifact")
    p.add_argument("--out", required=True, help="head artifact to write (JSON)")
    p.add_argument("--split-seed", default="baer-v1", help="salt of the id-hash split (default: baer-v1)")
    p.add_argument("--head", default="auto", choices=("auto", "stack", "route", "reference"),
                   help="auto: select through the gates (default); otherwise force one head (ablations; "
                        "recorded as forced)")
    p.add_argument("--reference-expert", default=None, metavar="NAME",
                   help="reference-verification expert (default: the expert named 'reference', if present)")
    p.add_argument("--pointwise-expert", default=None, metavar="NAME",
                   help="pointwise expert, a routing candidate only (default: 'pointwise', if present)")
    from baer_fast.io.rejects import add_on_error_argument
    add_on_error_argument(p)
    from baer_fast.commands.frontier import add_fit_arguments
    add_fit_arguments(p)      # --budget, --cascade, --costs, --transfer-from (docs/cost.md)


def selection_lines(art: dict) -> list[str]:
    """Human-readable decision: every candidate's dev accuracy per gate and the reason."""
    sel = art["selection"]
    out = [f"  selection: {sel['deployed']}{' (forced)' if sel.get('forced') else ''} -- {sel['reason']}"]
    for name, c in sel.get("candidates", {}).items():
        cv = f" cv {100 * c['cv_accuracy']:.1f}" if "cv_accuracy" in c else ""
        tag = " (in-sample)" if c.get("in_sample") else ""
        out.append(f"    {name:<10} selection {100 * c['selection_accuracy']:.1f} "
                   f"calibration {100 * c['calibration_accuracy']:.1f}{tag}{cv}")
    gates = sel.get("gates", {})
    if "route" in gates:
        g = gates["route"]
        out.append(f"    gate route: CV route {100 * g['route_cv_accuracy']:.1f} vs stack "
                   f"{100 * g['stack_cv_accuracy']:.1f} -> {'pass' if g['passed'] else 'fail'}")
    if "reference" in gates:
        g = gates["reference"]
        out.append(f"    gate reference: vs {g['baseline']} margins selection {100 * g['selection_margin']:+.1f} "
                   f"calibration {100 * g['calibration_margin']:+.1f} -> {'pass' if g['passed'] else 'fail'}")
    return out


def derived_params_beside(signal_paths: list[str]) -> dict:
    """The derived-expert parameters `baer-fast experts` wrote beside the signals (<signals>.derived.json).

    They were fitted label-free on non-test pairs; several files must agree.
    """
    import json
    import os

    from baer_fast.errors import InputError

    found = {}
    for path in signal_paths:
        side = path + ".derived.json"
        if os.path.exists(side):
            with open(side, encoding="utf-8") as fh:
                try:
                    params = json.load(fh)
                except ValueError as e:
                    raise InputError(f"malformed JSON: {e}", path=side) from None
            for name, value in params.items():
                if found.setdefault(name, value) != value:
                    raise InputError(f"derived expert {name!r} has different parameters in different "
                                     "signals files; fit one condition from one experts run", path=side)
    return found


def run(args) -> int:
    from baer_fast import artifact
    from baer_fast.io.records import read_signals_many
    from baer_fast.io.rejects import rejects_for, report_rejects
    from baer_fast.selection.fit import check_one_condition, fit_condition
    from baer_fast.io.splits import SplitSpec

    rejects = rejects_for(args, out=args.out)
    try:
        records = read_signals_many(args.signals, rejects=rejects)
    finally:
        report_rejects(rejects)
    check_one_condition(records, ",".join(args.signals))
    from baer_fast.commands.frontier import cost_fit
    art = cost_fit(args, records) or fit_condition(
        records, condition=args.condition, spec=SplitSpec(seed=args.split_seed), head=args.head,
        reference_expert=args.reference_expert, pointwise_expert=args.pointwise_expert)
    derived = derived_params_beside(args.signals)
    if derived:
        art["derived_params"] = derived      # frozen PriDe/CalibraEval maps, used by score --model and Judge
    artifact.save(args.out, art)
    fo = art["fitted_on"]
    print(f"{args.condition}: deployed head={art['head']} ({art['selection']['reason']}); "
          f"fitted on {fo['n_rows']} rows (selection {fo['n_selection']}, calibration {fo['n_calibration']}); "
          f"{len(art['experts'])} experts -> {args.out}")
    print("\n".join(selection_lines(art)))
    if "stack" in art["fit_report"]:
        lam = art["fit_report"]["stack"]["lambda_table"]
        cells = ", ".join(f"{r['lambda']:g}:{100 * r['calibration_accuracy']:.1f}" for r in lam)
        print(f"  stack lambda (calibration acc %): {cells}", file=sys.stderr)
    return 0
