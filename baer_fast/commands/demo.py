"""`baer-fast demo`: the whole pipeline on the LLMBar Natural sample shipped in the package.

import -> fit one head per backbone -> score every pair -> accuracy on the held-apart test
split vs. the strongest single protocol. Uses the same library calls as the commands.
"""
from __future__ import annotations

import logging
import os
import tempfile


def add_arguments(p) -> None:
    p.add_argument("--out", help="keep the demo's files (pairs, signals, heads, scores) in this folder "
                                 "(default: a temporary folder, removed at the end)")
    p.add_argument("--json", action="store_true", help="print per-condition reports as JSON")


def sample_dir() -> str:
    from importlib.resources import files

    return str(files("baer_fast") / "data" / "llmbar_natural" / "Natural")


def sample_pairs(n: int | None = None) -> list:
    """The first n pairs (None: all) of the sample: real lengths for benchmarks and tests."""
    from baer_fast.io.adapters import load

    return load("llmbar", sample_dir()).pairs[:n]


def run_condition(condition: str, signals: list, out_dir: str) -> dict:
    from baer_fast import artifact
    from baer_fast.eval.metrics import evaluate
    from baer_fast.io.jsonl import write_jsonl
    from baer_fast.io.records import write_signals
    from baer_fast.scoring import score_records
    from baer_fast.selection.fit import fit_condition
    from baer_fast.io.splits import roles

    write_signals(os.path.join(out_dir, f"signals.{condition}.jsonl"), signals)
    art = fit_condition(signals, condition=condition)
    head_path = os.path.join(out_dir, f"head.{condition}.json")
    artifact.save(head_path, art)
    art = artifact.load(head_path)           # score from the frozen file, as users do
    records = score_records(art, signals)
    write_jsonl(os.path.join(out_dir, f"scores.{condition}.jsonl"), records)
    report = evaluate(signals, [s["score"] for s in records], roles(signals), split="test")
    report["head"] = art["head"]
    return report


def summary_row(condition: str, rep: dict) -> str:
    t = rep["strongest_baseline"]
    d = rep["strongest_on_dev"]
    best = f"{t['expert']} ({t['reading'][0]})"
    return (f"{condition:<14} {rep['head']:<8} {100 * rep['accuracy']:6.1f} {100 * rep['accuracy_native']:6.1f}  "
            f"{100 * t['accuracy']:6.1f} {best:<22} {100 * (rep['accuracy'] - t['accuracy']):+6.1f} "
            f"{100 * d['accuracy']:6.1f} {d['expert']:<18} "
            f"{t['mcnemar_strict']['p_value']:7.3f} {t['mcnemar_native']['p_value']:7.3f} "
            f"{100 * rep['oracle_any_expert']:6.1f}")


def run_all(out_dir: str, *, keep: bool = True) -> dict:
    """The sample imported into out_dir (pairs.jsonl, signals.*), then per backbone its head and scores."""
    from baer_fast.io.adapters import load
    from baer_fast.io.records import write_pairs

    imported = load("llmbar", sample_dir())
    write_pairs(os.path.join(out_dir, "pairs.jsonl"), imported.pairs)
    where = out_dir if keep else "a temporary folder, removed at the end (--out DIR keeps them)"
    logging.getLogger("baer_fast").info("LLMBar Natural sample: %d pairs, %d backbones; files in %s",
                                        len(imported.pairs), len(imported.banks), where)
    return {c: run_condition(c, sig, out_dir) for c, sig in sorted(imported.banks.items())}


def run(args) -> int:
    import json

    from baer_fast.io.jsonl import make_dir

    if args.out:
        make_dir(args.out, field="--out")
        reports = run_all(args.out)
    else:
        with tempfile.TemporaryDirectory(prefix="baer-demo-") as tmp:
            reports = run_all(tmp, keep=False)
    if args.json:
        print(json.dumps(reports, indent=1))
        return 0
    n_test = next(iter(reports.values()))["n_scored"]
    print(f"Test-split accuracy (%) on LLMBar Natural, {n_test} held-apart pairs per backbone")
    print(f"{'condition':<14} {'head':<8} {'BAER':>6} {'2-ord':>6}  {'best':>6} {'(protocol, reading)':<22} {'gain':>6} "
          f"{'@dev':>6} {'(protocol)':<18} {'p strict':>7} {'p native':>7} {'oracle':>6}")
    for condition, rep in reports.items():
        print(summary_row(condition, rep))
    print("2-ord: BAER judged in both display orders and averaged (Eq. 1 gives a pair scored exactly 0 to "
          "whichever response is listed first; averaged, it earns half). "
          "best: strongest external protocol chosen ON TEST under its stronger reading (s = strict: undecided "
          "is an error; n = native: each order judged alone, half credit when the orders disagree); @dev: chosen "
          "on dev rows. p: exact McNemar vs. the strict reading, exact paired sign-flip test vs. the native one.")
    return 0
