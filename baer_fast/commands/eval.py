"""`baer-fast eval --signals S --scores scores.jsonl [--json] [--split test|dev|all] [--report DIR] [--baselines A,B]`."""
from __future__ import annotations

import json


def add_arguments(p) -> None:
    p.add_argument("--signals", required=True, help="signals JSONL (labels and single-expert evidence)")
    p.add_argument("--scores", required=True, help="scores JSONL written by `baer-fast score`")
    p.add_argument("--split", default="test", choices=("test", "dev", "all"),
                   help="rows to evaluate (default: test, the held-apart split)")
    p.add_argument("--split-seed", default="baer-v1", help="salt of the id-hash split used at fit time")
    p.add_argument("--json", action="store_true", help="print the report as JSON instead of a table")
    p.add_argument("--report", metavar="DIR", help="also write DIR/report.html with PNG plots")
    p.add_argument("--head", help="head artifact the scores came from (shows its selection in --report)")
    p.add_argument("--bootstrap", type=int, default=1000, metavar="N",
                   help="resamples of the accuracy bootstrap interval (accuracy_ci; default 1000)")
    p.add_argument("--bootstrap-seed", type=int, default=0, help="seed of the bootstrap resampling")
    p.add_argument("--leaderboard", choices=("rewardbench", "rewardbench-2"),
                   help="also compute a benchmark's leaderboard scores (rewardbench: section scores; "
                        "rewardbench-2: a prompt right when the head is right on all its pairs)")
    p.add_argument("--baselines", metavar="A,B,...",
                   help="the baseline pool (comma-separated experts); default: every expert except reference, "
                        "pointwise, deliberate and any --internal")
    p.add_argument("--internal", action="append", default=[], metavar="EXPERT",
                   help="also keep EXPERT out of the default baseline pool (BAER's own expert); repeatable")


def load_scores(path: str, ids: list[str]):
    """[N] scores aligned with `ids`, and the head name recorded in the file (or None)."""
    import numpy as np

    from baer_fast.errors import InputError
    from baer_fast.io.jsonl import is_finite_number, iter_jsonl

    found, head = {}, None
    for line, obj in iter_jsonl(path):
        for key in ("id", "score"):
            if key not in obj:
                raise InputError("missing required field", path=path, line=line, field=key)
        if not isinstance(obj["id"], str) or not obj["id"].strip():
            raise InputError(f"expected a non-empty string, got {obj['id']!r}", path=path, line=line, field="id")
        if not is_finite_number(obj["score"]):
            raise InputError(f"expected a finite number, got {obj['score']!r}", path=path, line=line, field="score")
        if obj["id"] in found:
            raise InputError(f"duplicate id {obj['id']!r}", path=path, line=line, field="id")
        found[obj["id"]] = float(obj["score"])
        if isinstance(obj.get("head"), str):
            head = obj["head"]
    missing = [i for i in ids if i not in found]
    if missing:
        raise InputError(f"{len(missing)} pairs of the signals have no score (first: {missing[0]!r}); "
                         "every pair must be scored", path=path, field="id")
    return np.array([found[i] for i in ids], dtype=np.float64), head


def run(args) -> int:
    from baer_fast.eval.metrics import evaluate
    from baer_fast.io.records import read_signals
    from baer_fast.io.splits import SplitSpec, roles

    art = None
    if args.head:
        from baer_fast import artifact

        art = artifact.load(args.head)
    records = read_signals(args.signals)
    scores, head = load_scores(args.scores, [r.id for r in records])
    row_roles = roles(records, SplitSpec(seed=args.split_seed))
    baselines = [b.strip() for b in args.baselines.split(",") if b.strip()] if args.baselines else None
    try:
        report = evaluate(records, scores, row_roles, split=args.split, baselines=baselines, internal=args.internal)
    except ValueError as e:
        from baer_fast.errors import InputError

        raise InputError(str(e), field="--baselines") from None
    report["head"] = head or (art["head"] if art else "head")
    report.update(_figures(args, records, scores, row_roles, report))
    if args.report:
        from baer_fast.eval.report import write_report

        path = write_report(args.report, records=records, scores=scores, roles=row_roles, report=report,
                            artifact=art, title=f"{args.signals} — {args.scores}")
        report["report_html"] = path
    print(json.dumps(report, indent=1) if args.json else _table(report, args.signals))
    if args.report and not args.json:
        print(f"report: {report['report_html']}")
    return 0


def _figures(args, records, scores, row_roles, report) -> dict:
    """per_subset, per_category, bias, calibration, accuracy_ci (+ leaderboard): eval/figures.py."""
    from baer_fast.eval.figures import FigureOptions, figures

    opts = FigureOptions(bootstrap=args.bootstrap, seed=args.bootstrap_seed, leaderboard=args.leaderboard)
    return figures(records, scores, row_roles, split=args.split, experts=sorted(report["experts"]),
                   model=report["head"], options=opts)


def _table(report, title) -> str:
    from baer_fast.eval.figures import format_figures
    from baer_fast.eval.metrics import format_table

    return format_table(report, title=title) + "\n" + format_figures(report)
