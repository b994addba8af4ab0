"""`baer-fast eval --signals S --scores scores.jsonl [--head head.json] [--json] [--split test|dev|all] [--report DIR]`.

Thin wiring: the inputs and their agreement (eval/inputs.py), the metrics (eval/metrics.py,
eval/figures.py), the table or JSON to stdout, the HTML report (eval/report.py).
"""
from __future__ import annotations

import argparse
import json
import logging
import math

log = logging.getLogger("baer_fast")
# the meta keys eval reads (bias: lengths; io.splits: split groups; leaderboard rewardbench-2: prompts);
# the rest (expert costs, pair statistics) is dropped as the signals are read
EVAL_META = ("len_a", "len_b", "split_group", "prompt_id")


def add_arguments(p) -> None:
    p.add_argument("--signals", required=True, help="signals JSONL (labels and single-expert evidence)")
    p.add_argument("--scores", required=True, help="scores JSONL written by `baer-fast score`")
    p.add_argument("--split", default="test", choices=("test", "dev", "all"),
                   help="rows to evaluate (default: test, the held-apart split)")
    p.add_argument("--split-seed", default=None,
                   help="salt of the id-hash split used at fit time (default: the split --head was fitted on, else "
                        "the one the score run recorded, else baer-v1; one that disagrees with either is refused)")
    p.add_argument("--json", action="store_true", help="print the report as JSON instead of a table")
    p.add_argument("--report", metavar="DIR",
                   help="also write a self-contained DIR/report.html (plots embedded; PNG copies beside it)")
    p.add_argument("--head", help="head artifact the scores came from: its split is used, scores of another head "
                                  "or signals without its experts are refused; its selection shows in --report")
    p.add_argument("--bootstrap", type=_positive_int, default=1000, metavar="N",
                   help="resamples of the accuracy bootstrap interval (accuracy_ci; default 1000)")
    p.add_argument("--bootstrap-seed", type=int, default=0, help="seed of the bootstrap resampling (default: %(default)s)")
    p.add_argument("--leaderboard", choices=("rewardbench", "rewardbench-2"),
                   help="also compute a benchmark's leaderboard scores (rewardbench: section scores; "
                        "rewardbench-2: a prompt right when the head is right on all its pairs)")
    p.add_argument("--baselines", metavar="A,B,...",
                   help="the baseline pool (comma-separated experts); default: every expert except reference, "
                        "pointwise, deliberate, any --internal and those --head's fit kept out of its external protocols")
    p.add_argument("--internal", action="append", default=[], metavar="EXPERT",
                   help="also keep EXPERT out of the default baseline pool (BAER's own expert; not with "
                        "--baselines); repeatable")
    p.add_argument("--on-error", choices=("raise", "skip"), default="raise",
                   help="bad signals/scores records and pairs without a score: stop with an error (raise, "
                        "default) or leave them out of every figure, counted in the report (skip)")


def _positive_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {n}")
    return n


def load_scores(path: str, ids: list[str]):
    """[N] scores aligned with `ids`, and the head name recorded in the file (or None)."""
    import numpy as np

    from baer_fast.eval.inputs import align, read_scores
    from baer_fast.io.records import Signals

    sc = read_scores(path)
    _, _, scores, _ = align(sc, [Signals(i, {}) for i in ids], ["test"] * len(ids),
                            split_rows=lambda r: np.ones(len(r), bool), skip=False)
    return scores, sc.named.get("head", (None,))[0]


def _inputs(args):
    """(records, roles, scores, artifact, scores' head name, split source, LeftOut): eval/inputs.py."""
    from baer_fast.eval import inputs
    from baer_fast.eval.report import split_mask
    from baer_fast.features.evidence import MemoRecords
    from baer_fast.io.records import read_signals
    from baer_fast.io.rejects import Rejects
    from baer_fast.io.splits import roles

    art = None
    if args.head:
        from baer_fast import artifact

        art = artifact.load(args.head)
    rejects = Rejects() if args.on_error == "skip" else None
    records = read_signals(args.signals, rejects=rejects, meta_keys=EVAL_META)
    sc = inputs.read_scores(args.scores, rejects=rejects)
    if art is not None:
        inputs.check_against_head(sc, art, head_path=args.head, records=records, signals_path=args.signals)
    spec, source = inputs.split_spec(art, args.split_seed, head_path=args.head, scores_path=args.scores)
    records = sorted(records, key=lambda r: r.id)  # id order: sums and bootstrap resamples ignore file order
    records, row_roles, scores, left = inputs.align(sc, records, roles(records, spec), skip=rejects is not None,
                                                    split_rows=lambda r: split_mask(r, args.split))
    records = MemoRecords(records)         # each expert list's runs tensor built once, not in every figure
    if rejects:
        left.bad_records, left.first_error = len(rejects), rejects.items[0]["error"]
    split = {**spec.to_json(), "from": source}
    return records, row_roles, scores, art, sc.named.get("head", (None,))[0], split, left


def _pool(args, records) -> list | None:
    """--baselines as a list (None: the default pool); --internal names checked against the signals, and
    refused beside --baselines (it would not change that pool)."""
    from baer_fast.errors import InputError
    from baer_fast.heads.single import check_internal

    check_internal(args.internal, records, args.signals)
    if args.baselines is None:
        return None
    if args.internal:
        raise InputError("only shapes the default pool; with --baselines, leave the expert out of that list",
                         field="--internal")
    pool = [b.strip() for b in args.baselines.split(",") if b.strip()]
    if not pool:
        raise InputError(f"{args.baselines!r} names no expert; leave --baselines out for the default pool",
                         field="--baselines")
    return pool


def head_internal(art: dict | None) -> list:
    """The experts fit's reference gate left out of the external protocols (selection/fit.py): the ones
    --reference-expert and --pointwise-expert named (BAER's own, whatever their names) and fit's --internal
    ones, recorded as the gate's `pool`. The default pool here leaves them out too."""
    own = [(art or {}).get("reference_expert"), (art or {}).get("pointwise_expert")]
    out = [e for e in own if isinstance(e, str) and e]
    gate = (((art or {}).get("selection") or {}).get("gates") or {}).get("reference") or {}
    if isinstance(gate.get("pool"), list):
        out += [e for e in art.get("experts", []) if e not in gate["pool"] and e not in out]
    return out


def run(args) -> int:
    from baer_fast.errors import InputError
    from baer_fast.eval.metrics import evaluate

    records, row_roles, scores, art, head, split, left = _inputs(args)
    try:
        report = evaluate(records, scores, row_roles, split=args.split, baselines=_pool(args, records),
                          internal=[*args.internal, *head_internal(art)])
    except ValueError as e:
        raise InputError(str(e), field="--baselines") from None
    if report["n_scored"] == 0:
        raise InputError(f"no labelled pair in the {args.split} split ({report['n_pairs']} pairs: "
                         f"{report['n_tie_labels']} tie labels, {report['n_unlabelled']} unlabelled): accuracy "
                         "needs labels 'a' or 'b'", path=args.signals, field="label")
    report["head"] = head or (art["head"] if art else "head")
    report["split_spec"] = split
    if left:
        report["left_out"] = left.to_json()
        log.warning("%s", _left_out_line(left))
    report.update(_figures(args, records, scores, row_roles, report))
    cost = _cost(art, records, row_roles, args.split)
    if cost:
        report["cost"] = cost
    if args.report:
        from baer_fast.eval.report import write_report

        path = write_report(args.report, records=records, scores=scores, roles=row_roles, report=report,
                            artifact=art, title=f"{args.signals} — {args.scores}")
        report["report_html"] = path
    print(json.dumps(_finite(report), indent=1, allow_nan=False) if args.json else _table(report, args.signals, art))
    if args.report and not args.json:
        print(f"report: {report['report_html']}")
    return 0


def _left_out_line(left) -> str:
    first = f" (first: {left.first_error})" if left.first_error else ""
    return (f"--on-error skip left out {left.unscored_in_split} unscored pairs of this split "
            f"({left.unscored} in all) and {left.bad_records} bad records{first}; the figures cover the scored "
            "pairs only")


def _finite(x):
    """The report with NaN/inf as null, so --json is valid JSON."""
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    return None if isinstance(x, float) and not math.isfinite(x) else x


def _figures(args, records, scores, row_roles, report) -> dict:
    """per_subset, per_category, bias, calibration, accuracy_ci (+ leaderboard): eval/figures.py."""
    from baer_fast.eval.figures import FigureOptions, figures

    opts = FigureOptions(bootstrap=args.bootstrap, seed=args.bootstrap_seed, leaderboard=args.leaderboard)
    return figures(records, scores, row_roles, split=args.split, experts=sorted(report["experts"]),
                   model=report["head"], options=opts)


BUDGET_KEYS = ("budget", "experts", "allocation", "cost_per_pair", "full_cost_per_pair", "fraction_of_full",
               "cost_source", "cv_accuracy", "full_cv_accuracy", "near_full")
CASCADE_KEYS = ("stage1_experts", "tau", "cheap_budget", "tolerance", "stage1_cost_per_pair", "full_cost_per_pair",
                "expected_cost_per_pair", "stage2_reads_stage1_prefixes", "cost_source")


def _cost(art: dict | None, records, roles, split: str) -> dict | None:
    """What the head runs (the artifact's budget subset, cascade or declined cascade: docs/cost.md), and
    how many of this split's pairs the cascade's stage 1 decides (read from the signals' stage-1 runs)."""
    if not art or not any(k in art for k in ("budget", "cascade", "cascade_declined")):
        return None
    out = {}
    if "budget" in art:
        out["budget"] = {k: art["budget"][k] for k in BUDGET_KEYS if k in art["budget"]}
    if art.get("cascade"):
        from baer_fast.artifact import deployed_head
        from baer_fast.eval.report import split_mask
        c = art["cascade"]
        out["cascade"] = {**{k: c[k] for k in CASCADE_KEYS if k in c}, "cv_exit_rate": c["cv"]["cv_exit_rate"]}
        mine = [r for r, m in zip(records, split_mask(roles, split)) if m]
        if all(e in r.experts for r in mine for e in c["stage1_experts"]):
            exits = deployed_head(art).exits(mine)          # the cascade's own exit rule
            out["cascade"].update(split_pairs=len(mine), split_exits=int(exits.sum()),
                                  split_exit_rate=float(exits.mean()) if mine else 0.0)
    if "cascade_declined" in art:
        out["cascade_declined"] = art["cascade_declined"]
    return out


def _cost_lines(art: dict | None, cost: dict) -> list[str]:
    """fit's own lines on the head's cost (commands/frontier.cost_lines), then the cascade's exits here."""
    from baer_fast.commands.frontier import cost_lines
    if not cost:
        return []
    out = cost_lines(art)
    c = cost.get("cascade")
    if c:
        out.append(f"  cascade on this split: {c['split_exits']} of {c['split_pairs']} pairs of this split exit after "
                   f"stage 1 ({100 * c['split_exit_rate']:.1f}%; CV {100 * c['cv_exit_rate']:.1f}%)"
                   if "split_exits" in c else "  cascade on this split: the signals lack stage 1's runs")
    return out


def _table(report, title, art=None) -> str:
    from baer_fast.eval.figures import format_figures
    from baer_fast.eval.metrics import format_table

    lines = [format_table(report, title=title)]
    sp = report.get("split_spec")
    if sp and sp["from"] != "default":
        was = {"head": "the head", "scores": "the head the score run recorded"}.get(sp["from"], "--split-seed")
        lines.append(f"  split seed {sp['seed']!r} (from {was})")
    if report.get("left_out"):
        from baer_fast.eval.inputs import LeftOut

        lines.append("  " + _left_out_line(LeftOut(**report["left_out"])))
    lines += _cost_lines(art, report.get("cost"))
    return "\n".join(lines + [format_figures(report)])
