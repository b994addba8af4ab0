"""`baer-fast fit --signals S... --condition NAME --out head.json [--head auto|HEAD]`.

Fits every head on the non-test rows, selects one by the standard-error rule on nested CV and the
reference gate (or takes the forced one), writes the artifact and prints every candidate.
"""
from __future__ import annotations

import sys

HEADS = ("auto", "mean", "vote", "shrunk", "stack", "constant", "route", "reference")   # = selection.gates.HEAD_CHOICES


def add_arguments(p) -> None:
    p.add_argument("--signals", nargs="+", required=True, help="signals JSONL file(s) of ONE condition")
    p.add_argument("--condition", required=True, help="condition name (benchmark x backbone) stored in the artifact")
    p.add_argument("--out", required=True, help="head artifact to write (JSON)")
    p.add_argument("--split-seed", default="baer-v1", help="salt of the id-hash split (default: baer-v1)")
    p.add_argument("--head", default="auto", choices=HEADS,
                   help="auto: the standard-error rule on nested CV, then the reference gate (default); "
                        "otherwise force "
                        "one head (ablations; recorded as forced). See docs/selection.md")
    p.add_argument("--internal", action="append", default=[], metavar="EXPERT",
                   help="treat EXPERT as internal (not an external baseline of the reference gate); repeatable")
    p.add_argument("--reference-expert", default=None, metavar="NAME",
                   help="reference-verification expert (default: the expert named 'reference', if present)")
    p.add_argument("--pointwise-expert", default=None, metavar="NAME",
                   help="pointwise expert, a routing candidate only (default: 'pointwise', if present)")
    p.add_argument("--no-tiebreak", action="store_true",
                   help="keep exact ties (s = 0) as Eq. 1 reads them (a) instead of breaking them by response "
                        "length in the direction the training rows show (docs/selection.md)")
    p.add_argument("--experts", default=None, metavar="A,B,...",
                   help="fit on these experts only (comma-separated); the signals' other experts are ignored, "
                        "e.g. to fit a source head for another condition's --transfer-from on the experts it has")
    p.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="threads that build the route candidate's forests (joblib's n_jobs: -1 = every core); "
                        "the trees, so the artifact, are the same bytes for any N (default: 1)")
    from baer_fast.io.rejects import add_on_error_argument
    add_on_error_argument(p)
    from baer_fast.commands.frontier import add_fit_arguments
    add_fit_arguments(p)      # --budget, --cascade, --costs, --transfer-from (docs/cost.md)


def selection_lines(art: dict) -> list[str]:
    """Human-readable decision: every candidate's out-of-fold and in-sample figures, each rule step."""
    sel = art["selection"]
    out = [f"  selection: {sel['deployed']}{' (forced)' if sel.get('forced') else ''} -- {sel['reason']}"]
    cv = sel.get("nested_cv")
    if cv:
        out.append(f"    nested CV: {cv['repeats']} x {cv['folds']}-fold (inner {cv['inner_folds']}-fold), same folds "
                   "for every candidate")
    for name, c in sel.get("candidates", {}).items():
        oof = (f" out-of-fold {100 * c['oof_accuracy']:.1f} (fold sd {100 * c['fold_sd']:.1f})"
               if "oof_accuracy" in c else "")
        picks = f" [{', '.join(f'{k}:{n}' for k, n in c['chosen_in_folds'].items())}]" if c.get("chosen_in_folds") else ""
        tag = " (in-sample)" if c.get("in_sample") else ""
        out.append(f"    {name:<10}{oof} selection {100 * c['selection_accuracy']:.1f} "
                   f"calibration {100 * c['calibration_accuracy']:.1f}{tag}{picks}")
    gates = sel.get("gates", {})
    for st in gates.get("rule", {}).get("steps", []):
        out.append(f"    rule: {st['candidate']} vs {st['against']}: gain {100 * st['gain']:+.1f} > noise "
                   f"{st.get('bar', 1.0):g} x {100 * st['se']:.1f}? {'yes' if st['advanced'] else 'no'}")
    if "reference" in gates:
        g = gates["reference"]
        out.append(f"    gate reference: vs {g['baseline']} ({g.get('baseline_reading', 'strict')}) margins selection "
                   f"{100 * g['selection_margin']:+.1f} calibration {100 * g['calibration_margin']:+.1f} -> "
                   f"{'pass' if g['passed'] else 'fail'}")
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
            if not isinstance(params, dict):
                raise InputError(f"expected a JSON object {{expert: parameters}}, got {type(params).__name__}",
                                 path=side)
            for name, value in params.items():
                if found.setdefault(name, value) != value:
                    raise InputError(f"derived expert {name!r} has different parameters in different "
                                     "signals files; fit one condition from one experts run", path=side)
    return found


def only_experts(records: list, names: str | None, where: str) -> tuple[list, dict | None]:
    """`--experts A,B`: the records restricted to those experts, and what was kept and dropped (None: all)."""
    if names is None:
        return records, None
    from baer_fast.errors import InputError
    from baer_fast.selection.budget import restrict

    wanted = sorted({n.strip() for n in names.split(",") if n.strip()})
    present = sorted({k for r in records for k in r.experts})
    unknown = [n for n in wanted if n not in present]
    if not wanted or unknown:
        raise InputError(f"{'no expert named' if not wanted else 'not in these signals: ' + ', '.join(unknown)}"
                         f" (they have: {', '.join(present)})", path=where, field="--experts")
    return restrict(records, wanted), {"kept": wanted, "dropped": [k for k in present if k not in wanted]}


def run(args) -> int:
    from baer_fast import artifact
    from baer_fast.io.records import read_signals_many
    from baer_fast.io.jsonl import check_output
    from baer_fast.bank.generative import recorded_settings
    from baer_fast.commands.frontier import check_fit_options
    from baer_fast.heads.single import check_internal
    from baer_fast.io.rejects import rejects_for, report_rejects
    from baer_fast.selection.fit import check_one_condition, fit_condition

    check_output(args.out)
    check_fit_options(args)
    if args.jobs == 0 or args.jobs < -1:
        from baer_fast.errors import InputError
        raise InputError(f"must be at least 1, or -1 for every core (got {args.jobs})", field="--jobs")
    rejects = rejects_for(args, out=args.out)
    try:
        records = read_signals_many(args.signals, rejects=rejects)
    finally:
        report_rejects(rejects)
    check_one_condition(records, ",".join(args.signals))
    check_internal(args.internal, records, ",".join(args.signals))
    records, chosen = only_experts(records, args.experts, ",".join(args.signals))
    from baer_fast.commands.frontier import cost_fit, fit_kwargs
    from baer_fast.errors import located
    from joblib import parallel_config
    # the forests' n_jobs is None: joblib's setting here, on threads (the tree builder releases the GIL;
    # joblib's default process backend would copy the rows to each worker); the trees do not depend on it
    with located(args.signals), parallel_config(backend="threading", n_jobs=args.jobs):
        art = cost_fit(args, records) or fit_condition(records, **fit_kwargs(args))
    if chosen is not None:
        art["fit_report"]["experts_option"] = chosen      # what `--experts` kept and set aside
    generation = recorded_settings(records, art["experts"])
    if generation:
        art["generation"] = generation       # the budgets and seed score --model, Judge and serve decode with
    derived = derived_params_beside(args.signals)
    if derived:
        art["derived_params"] = derived      # frozen PriDe/CalibraEval maps, used by score --model and Judge
    artifact.save(args.out, art)
    fo = art["fitted_on"]
    print(f"{args.condition}: deployed head={art['head']} ({art['selection']['reason']}); "
          f"fitted on {fo['n_rows']} rows (selection {fo['n_selection']}, calibration {fo['n_calibration']}); "
          f"{len(art['experts'])} expert{'s' * (len(art['experts']) != 1)} -> {args.out}")
    print("\n".join(selection_lines(art)))
    if art.get("tiebreak"):
        from baer_fast.heads.tiebreak import describe
        print(f"  {describe(art['tiebreak'])}")
    if "stack" in art["fit_report"]:
        lam = art["fit_report"]["stack"]["lambda_table"]
        cells = ", ".join(f"{r['lambda']:g}:{100 * r['cv_accuracy']:.1f}" for r in lam)
        print(f"  stack lambda (CV acc %): {cells}", file=sys.stderr)
    return 0
