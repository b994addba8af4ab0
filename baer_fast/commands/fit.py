"""`baer-fast fit --signals S... --condition NAME --out head.json`."""
from __future__ import annotations

import sys


def add_arguments(p) -> None:
    p.add_argument("--signals", nargs="+", required=True, help="signals JSONL file(s) of ONE condition")
    p.add_argument("--condition", required=True, help="condition name (benchmark x backbone) stored in the artifact")
    p.add_argument("--out", required=True, help="head artifact to write (JSON)")
    p.add_argument("--split-seed", default="baer-v1", help="salt of the id-hash split (default: baer-v1)")


def run(args) -> int:
    from baer_fast import artifact
    from baer_fast.io.records import read_signals_many
    from baer_fast.selection.fit import check_one_condition, fit_condition
    from baer_fast.selection.splits import SplitSpec

    records = read_signals_many(args.signals)
    check_one_condition(records, ",".join(args.signals))
    art = fit_condition(records, condition=args.condition, spec=SplitSpec(seed=args.split_seed))
    artifact.save(args.out, art)
    fo = art["fitted_on"]
    print(f"{args.condition}: deployed head={art['head']} ({art['selection']['reason']}); "
          f"fitted on {fo['n_rows']} rows (selection {fo['n_selection']}, calibration {fo['n_calibration']}); "
          f"{len(art['experts'])} experts -> {args.out}")
    if "stack" in art["fit_report"]:
        lam = art["fit_report"]["stack"]["lambda_table"]
        cells = ", ".join(f"{r['lambda']:g}:{100 * r['calibration_accuracy']:.1f}" for r in lam)
        print(f"  stack lambda (calibration acc %): {cells}", file=sys.stderr)
    return 0
