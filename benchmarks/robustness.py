"""Does the deployed head hold against the strongest single protocol on data the fit has not seen?

    python benchmarks/robustness.py [--splits N] [--first I] [--jobs J] [--data ROOT] [--only SUBSTR]

Every public condition with an expert bank in ../shared/data (LLMBar Natural, CaseStudy,
Processed: each base LLM is a condition; the JudgeBench GPT-4o bank; Auto-J, which has
both orders) x N seeded dev/test splits (`SplitSpec(seed="robust-<i>")`, i = first .. first + N - 1, so
`--first 20` draws fresh splits to confirm a change tuned on the default ones: selection 20%,
calibration 40%, test 40%, exactly the splitter `fit` uses). Per cell: `fit_condition`
on the non-test rows (in process), the deployed head scored on test, compared with the
strongest single protocol ON TEST under the fair reading (per protocol the stronger of
the strict and native readings, `heads.single`), over the baseline pool (external
protocols). Two reference rules on the same cells: the protocol best on dev (fair
reading, chosen on the non-test rows) and the plain stack (the artifact's stack head).
Per condition and pooled: win rate (gain >= 0), mean gain, worst gain, in points. The deployed
head includes the artifact's length tie-break of exact ties (heads/tiebreak.py). A fourth
column, `tie½`, reads the deployed head's remaining exact ties (s = 0) as half credit instead of Eq. 1's
"a": a pair whose every expert contradicts itself across the two orders is a fixed point of
the swap, so any antisymmetric head scores it 0 and Eq. 1 turns it into a coin flip on the
label, where the baseline's native reading gives the protocol a steady 0.5 (diagnostic only;
the headline is Eq. 1).
Table to stderr, ONE JSON line to stdout; --out FILE also writes the table + JSON.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")     # tiny matrices: BLAS threads only fight the worker processes

SOURCES = (   # (benchmark, adapter, folder under the data root)
    ("natural", "llmbar", "llmbar_natural/LLMBar/Natural"),
    ("casestudy", "llmbar", "llmbar_casestudy/CaseStudy"),
    ("processed", "llmbar", "llmbar_processed/Processed"),
    ("judgebench", "judgebench", "judgebench_gpt4o"),
    ("autoj", "autoj", "autoj_pairwise_test"),
)
RULES = ("baer", "best_dev", "stack", "baer_ties_half")
_CONDITIONS: dict = {}      # per worker process: name -> prepared condition


def default_root() -> Path:
    repo = Path(__file__).resolve().parents[1]
    return Path(os.environ.get("BAER_SHARED_DATA", repo.parent / "shared" / "data"))


def wanted(only: str | None, name: str) -> bool:
    """--only, the same in every benchmark script: a case-insensitive substring of the condition's name
    ("natural/PaLM2") or of its benchmark's name followed by "/" ("LLMBar-Natural/"), so `Natural`,
    `natural/` and `NATURAL` pick the same conditions everywhere."""
    return not only or only.lower() in name.lower()


def on_disk(root: Path, folders) -> list:
    """The folders found under root; the missing ones are logged at debug level only (when none is
    found, the caller's `no_cells` error names them)."""
    import logging

    found = [f for f in folders if (Path(root) / f).exists()]
    for f in folders:
        if f not in found:
            logging.getLogger("baer_fast.benchmarks").debug("skip %s: not under %s", f, root)
    return found


def no_cells(root: Path, folders, only: str | None, what: str = "condition") -> SystemExit:
    """The one-line error of a benchmark that found nothing to run (a table of nothing is no result):
    no bank under root, or an --only that matches no `what`."""
    if not any((Path(root) / f).exists() for f in folders):
        return SystemExit(f"no bank found under {root} (looked for {', '.join(folders)}): "
                          "set BAER_SHARED_DATA or pass the data root (--data, DATA_ROOT) of the shared data folder")
    if only:
        return SystemExit(f"--only {only!r} matches no {what} under {root}")
    return SystemExit(f"no {what} to run under {root}")


def two_orders(signals) -> bool:
    return any(len(runs) >= 2 for r in signals for runs in r.experts.values())


def load_conditions(root: Path, only: str | None = None) -> dict:
    """name -> signals, for every bank whose protocols ran in both display orders."""
    from baer_fast.io.adapters import load

    out, found = {}, on_disk(root, [rel for _, _, rel in SOURCES])
    for bench, kind, rel in SOURCES:
        if rel not in found:
            continue
        for cond, signals in sorted(load(kind, str(root / rel)).banks.items()):
            name = f"{bench}/{cond}"
            if wanted(only, name) and two_orders(signals):
                out[name] = signals
    if not out:         # a benchmark of nothing is no result: say so and fail, not a table of NaN
        raise no_cells(root, [rel for _, _, rel in SOURCES], only)
    return out


def prepare(signals) -> dict:
    """Split-independent pieces: labels and each pool protocol's strict/native credit."""
    import numpy as np

    from baer_fast.eval.metrics import label_signs
    from baer_fast.heads.single import baseline_pool, native_credit, strict_correct

    y = label_signs(signals)
    pool = baseline_pool({k for r in signals for k in r.experts})
    return {"signals": signals, "y": y, "pool": pool,
            "strict": strict_correct(signals, pool, y).astype(np.float64),
            "native": native_credit(signals, pool, y)}


def fair_accuracy(c: dict, rows):
    """[K] per-protocol accuracy on `rows` under the stronger reading."""
    import numpy as np

    return np.maximum(c["strict"][rows].mean(axis=0), c["native"][rows].mean(axis=0))


def run_cell(args: tuple) -> dict:
    """(condition name, split index) -> accuracies of the rules and of the test-best protocol."""
    import numpy as np

    from baer_fast.artifact import deployed_head
    from baer_fast.heads.stack import StackHead
    from baer_fast.selection.fit import fit_condition
    from baer_fast.eval.metrics import head_native_credit, head_predictions
    from baer_fast.io.splits import SplitSpec, roles

    name, i = args
    c = _CONDITIONS[name]
    spec = SplitSpec(seed=f"robust-{i}")
    rl = np.asarray(roles(c["signals"], spec))
    test = (rl == "test") & (c["y"] != 0)
    dev = (rl != "test") & (c["y"] != 0)
    t0, c0 = time.perf_counter(), time.process_time()
    art = fit_condition(c["signals"], condition=name, spec=spec)
    fit_s, cpu_s = time.perf_counter() - t0, time.process_time() - c0
    test_recs = [r for r, keep in zip(c["signals"], test) if keep]
    yt = c["y"][test]

    def acc(s) -> float:
        return float(np.mean(head_predictions(s) == yt))

    s = deployed_head(art).score(test_recs)
    fair_test = fair_accuracy(c, test)
    k_dev = int(np.argmax(fair_accuracy(c, dev)))
    return {"condition": name, "split": i, "n_test": int(test.sum()), "head": art["head"], "fit_s": fit_s, "cpu_s": cpu_s,
            "best": float(fair_test.max()), "best_name": c["pool"][int(np.argmax(fair_test))],
            "baer": acc(s), "baer_ties_half": float(np.mean(head_native_credit(s, yt))), "ties": int(np.sum(s == 0)),
            "best_dev": float(fair_test[k_dev]),
            "stack": acc(StackHead.from_json(art["heads"]["stack"]).score(test_recs))}


def _init(root: str, only: str | None) -> None:
    import logging

    logging.getLogger("baer_fast").setLevel(logging.WARNING)
    for name, signals in load_conditions(Path(root), only).items():
        _CONDITIONS[name] = prepare(signals)


def by_condition(cells: list[dict]) -> dict:
    """condition -> its cells, plus "POOLED" -> all of them."""
    groups = {}
    for c in cells:
        groups.setdefault(c["condition"], []).append(c)
    groups["POOLED"] = cells
    return groups


def gain_figures(gain) -> dict:
    """Gains in points against the test-best protocol -> win rate (gain >= 0, to rounding), mean, worst."""
    import numpy as np

    gain = np.asarray(gain, dtype=np.float64)
    return {"win_rate": float(np.mean(gain >= -1e-9)), "mean_gain": float(gain.mean()), "worst_gain": float(gain.min())}


def summarise(cells: list[dict]) -> dict:
    """Per condition and pooled: for each rule, win rate, mean gain and worst gain (points)."""
    import numpy as np

    out = {}
    for name, cs in by_condition(cells).items():
        row = {"cells": len(cs), "n_test": int(np.mean([c["n_test"] for c in cs])),
               "heads": {h: sum(c["head"] == h for c in cs) for h in sorted({c["head"] for c in cs})},
               "best_acc": float(np.mean([c["best"] for c in cs])),
               "tie_share": float(np.mean([c["ties"] / c["n_test"] for c in cs]))}
        for rule in RULES:
            gain = [100 * (c[rule] - c["best"]) for c in cs]
            row[rule] = {**gain_figures(gain), "acc": float(np.mean([c[rule] for c in cs]))}
        out[name] = row
    return out


def table(summary: dict) -> str:
    head = (f"{'condition':<28} {'n':>4} {'best':>6} | {'BAER win':>8} {'mean':>6} {'worst':>6} | "
            f"{'dev win':>7} {'mean':>6} {'worst':>6} | {'stk win':>7} {'mean':>6} {'worst':>6} | "
            f"{'tie½ win':>8} {'mean':>6} {'worst':>6} | {'ties':>5} | heads")
    lines = [head, "-" * len(head)]
    for name, r in summary.items():
        cells = " | ".join(f"{100 * r[k]['win_rate']:7.0f}% {r[k]['mean_gain']:+6.1f} {r[k]['worst_gain']:+6.1f}"
                           for k in RULES)
        heads = ",".join(f"{h}:{n}" for h, n in r["heads"].items())
        lines.append(f"{name:<28} {r['n_test']:>4} {100 * r['best_acc']:6.1f} | {cells} | {100 * r['tie_share']:4.0f}% | {heads}")
    return "\n".join(lines)


def _progress(cell: dict, k: int, total: int, t0: float) -> dict:
    print(f"[{k + 1}/{total} {time.perf_counter() - t0:.0f}s] {cell['condition']} split {cell['split']}: "
          f"{cell['head']} {100 * (cell['baer'] - cell['best']):+.1f}", file=sys.stderr, flush=True)
    return cell


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--splits", type=int, default=20, help="seeded dev/test splits per condition (default 20)")
    ap.add_argument("--first", type=int, default=0, help="index of the first split (default 0)")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    ap.add_argument("--data", default=str(default_root()), help="data root (default ../shared/data)")
    ap.add_argument("--only", help="keep conditions whose name contains this (case-insensitive: Natural, natural/)")
    ap.add_argument("--out", help="also write the table and the JSON line to this file")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    _init(args.data, args.only)
    jobs = [(name, i) for name in _CONDITIONS for i in range(args.first, args.first + args.splits)]
    if args.jobs > 1:
        import multiprocessing as mp

        with mp.get_context("fork").Pool(args.jobs) as pool:
            cells = [_progress(c, k, len(jobs), t0) for k, c in enumerate(pool.imap(run_cell, jobs, chunksize=1))]
    else:
        cells = [_progress(run_cell(j), k, len(jobs), t0) for k, j in enumerate(jobs)]
    summary = summarise(cells)
    text = table(summary)
    wall = time.perf_counter() - t0
    result = {"benchmark": "robustness", "splits": args.splits, "first": args.first, "jobs": args.jobs, "wall_s": round(wall, 1),
              "fit_s_total": round(sum(c["fit_s"] for c in cells), 1),
              "cpu_s_total": round(sum(c["cpu_s"] for c in cells), 1), "summary": summary, "cells": cells}
    print(text, file=sys.stderr)
    print(f"{len(cells)} cells, wall {wall:.0f}s with {args.jobs} jobs (fit wall time summed over cells "
          f"{result['fit_s_total']:.0f}s, fit CPU time {result['cpu_s_total']:.0f}s: on {args.jobs} idle cores "
          f"about {result['cpu_s_total'] / args.jobs:.0f}s)", file=sys.stderr)
    line = json.dumps(result, sort_keys=True)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write(text + "\n" + line + "\n")
    print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
