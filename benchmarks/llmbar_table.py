"""Head selection and test accuracy per condition on the published-judge data (markdown table).

    python benchmarks/llmbar_table.py [DATA_ROOT] [--out TABLE.md]   # default root: $BAER_SHARED_DATA or ../shared/data

For every LLMBar condition (Natural; CaseStudy, all 5 subsets; Processed, FairEval +
MT-Bench) and the JudgeBench GPT-4o bank: fit with the selection rule (`baer-fast fit`), score
the held-apart test split from the frozen head, and compare with the strongest single
external protocol chosen ON TEST under its stronger reading (strict or native; the
paper's baseline, optimistic for it) and with the stack alone. The stack alone is the artifact's own stack head: it is the same fit that
`--head stack` deploys (fitting is deterministic and fits every head either way).
Progress and the Markdown table to stderr (--out FILE also writes the table there), ONE JSON line
(the rows) to stdout.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

SOURCES = (   # (benchmark, adapter, folder under the data root)
    ("LLMBar-Natural", "llmbar", "llmbar_natural/LLMBar/Natural"),
    ("LLMBar-CaseStudy", "llmbar", "llmbar_casestudy/CaseStudy"),
    ("LLMBar-Processed", "llmbar", "llmbar_processed/Processed"),
    ("JudgeBench-GPT-4o", "judgebench", "judgebench_gpt4o"),
)


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def data_root(arg: str | None) -> Path:
    """DATA_ROOT, else the shared data root every benchmark reads (robustness.default_root)."""
    from robustness import default_root
    return Path(arg) if arg else default_root()


def short_reason(art: dict) -> str:
    sel = art["selection"]
    c = sel["candidates"]
    text = " / ".join(f"{k} {100 * c[k]['oof_accuracy']:.1f}" for k in ("mean", "shrunk", "stack", "constant", "route")
                      if k in c and "oof_accuracy" in c[k])
    if "reference" in sel["gates"]:
        r = sel["gates"]["reference"]
        text += f"; ref {100 * r['selection_margin']:+.1f}/{100 * r['calibration_margin']:+.1f}"
    return "out-of-fold " + text


def run_condition(name: str, signals: list) -> dict:
    from baer_fast.eval.metrics import evaluate, head_predictions, label_signs
    from baer_fast.heads.stack import StackHead
    from baer_fast.scoring import score_records
    from baer_fast.selection.fit import fit_condition
    from baer_fast.io.splits import roles

    art = fit_condition(signals, condition=name)
    scores = [s["score"] for s in score_records(art, signals)]
    rl = roles(signals)
    rep = evaluate(signals, scores, rl, split="test")
    stack = StackHead.from_json(art["heads"]["stack"]).score(signals)
    test = [r == "test" for r in rl]
    y = label_signs(signals)
    keep = [t and yi != 0 for t, yi in zip(test, y)]
    stack_acc = float((head_predictions(stack)[keep] == y[keep]).mean())
    best = rep["strongest_baseline"]
    return {"condition": name, "n_test": rep["n_scored"], "head": art["head"], "why": short_reason(art),
            "baer": rep["accuracy"], "baer_2ord": rep["accuracy_native"], "ties": rep["n_score_ties"], "stack": stack_acc, "best": best["accuracy"],
            "best_name": f"{best['expert']}, {best['reading']}", "best_strict": best["accuracy_strict"],
            "p_strict": best["mcnemar_strict"]["p_value"], "p_native": best["mcnemar_native"]["p_value"],
            "oracle": rep["oracle_any_expert"], "k": len(rep["baseline_pool"])}


def table(rows: list[dict]) -> str:
    lines = ["| condition | K | test n | head | why (dev only) | BAER | BAER 2-ord (ties) | stack alone "
             "| best single on test (fair) | its strict | Δ vs best | McNemar p strict / native | oracle |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['condition']} | {r['k']} | {r['n_test']} | {r['head']} | {r['why']} | "
                     f"{100 * r['baer']:.1f} | {100 * r['baer_2ord']:.1f} ({r['ties']}) | {100 * r['stack']:.1f} | {100 * r['best']:.1f} ({r['best_name']}) | "
                     f"{100 * r['best_strict']:.1f} | {100 * (r['baer'] - r['best']):+.1f} | "
                     f"{r['p_strict']:.3g} / {r['p_native']:.3g} | {100 * r['oracle']:.1f} |")
    wins = sum(r["baer"] >= r["best"] for r in rows)
    heads = {h: sum(r["head"] == h for r in rows) for h in sorted({r["head"] for r in rows})}
    lines.append("")
    lines.append(f"{len(rows)} conditions; heads deployed {heads}; BAER >= best single external protocol "
                 f"(chosen on test, stronger of strict/native reading) in {wins}. Accuracy in % on the id-hash "
                 "test split (40%), tie labels excluded. K = external protocols in the baseline pool. BAER 2-ord: "
                 "Eq. 1 averaged over both display orders (half credit on the test pairs scored exactly 0, counted "
                 "in brackets; `eval`'s native figure for the head).")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data", nargs="?", metavar="DATA_ROOT", help="data root (default: $BAER_SHARED_DATA, else ../shared/data)")
    ap.add_argument("--out", metavar="FILE", help="also write the Markdown table to FILE")
    args = ap.parse_args(argv)
    from baer_fast.io.adapters import load
    from robustness import no_cells, on_disk

    root = data_root(args.data)
    rows, t0 = [], time.perf_counter()
    found = on_disk(root, [rel for _, _, rel in SOURCES])
    for bench, kind, rel in SOURCES:
        if rel not in found:
            continue
        imported = load(kind, str(root / rel))
        for cond, signals in sorted(imported.banks.items()):
            name = cond if cond.startswith(bench.split("-")[0].lower()) else f"{bench}/{cond}"
            rows.append(run_condition(name, signals))
            print(f"{name}: {rows[-1]['head']} ({time.perf_counter() - t0:.0f}s)", file=sys.stderr)
    if not rows:
        raise no_cells(root, [rel for _, _, rel in SOURCES], None)
    text = table(rows)
    print(text, file=sys.stderr)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write(text + "\n")
    print(json.dumps({"benchmark": "llmbar_table", "conditions": len(rows), "rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
