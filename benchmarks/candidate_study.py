"""Candidate heads on the robustness cells: out-of-fold fold accuracies and test accuracies, rules replayed offline.

    python benchmarks/candidate_study.py base --first 0 --splits 20 --out BASE.jsonl [--oof]
    python benchmarks/candidate_variants.py 0 20 VARIANTS.jsonl            # prototype candidates, same folds
    python benchmarks/candidate_study.py replay BASE.jsonl [VARIANTS.jsonl ...] \
        [--grid shrunk,vote,...] [--order [mcnemar@2:]shrunk,stack,constant,route ...] [-v]

`base`: per (condition, split) cell of benchmarks/robustness.py, one `fit_condition` (so the
deployed head and every candidate's nested fold accuracies are exactly what `fit` computes),
then every candidate head of the artifact scored on test. One JSON line per cell (resumable:
cells already in FILE are skipped). `replay`: merges the files by cell (fold and test accuracies of
every candidate), then prints win rate / mean / worst gain per condition and pooled for
each head deployed everywhere (`--grid`) and for rule orders replayed on the stored fold
accuracies (`selection.rule.se_choice`, the same function `fit` calls); `base --oof` also stores each
candidate's out-of-fold correctness per repeat, and an order prefixed `mcnemar@BAR:` replays the rule
with the noise of paired pairs (McNemar's form) instead of folds. An order whose
first item is `a|b` starts from whichever of a and b has the higher mean out-of-fold
accuracy (ties to a). Progress and tables to stderr; both commands end with ONE JSON line on stdout
(`base`: what it wrote; `replay`: every run's summary). Never asserts.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import robustness as rb  # noqa: E402


def base_cell(name: str, i: int, oof: bool = False) -> dict:
    from contextlib import nullcontext
    from unittest.mock import patch

    import numpy as np

    import baer_fast.selection.fit as fit_mod
    from baer_fast.heads import head_class
    from baer_fast.io.splits import SplitSpec, roles
    from baer_fast.selection.fit import fit_condition

    right = {}

    def recording(data, candidate, folds, _orig=fit_mod.oof_scores):
        """`fit`'s oof_scores, also keeping each candidate's out-of-fold correctness per repeat (Eq. 1)."""
        scores, chosen = _orig(data, candidate, folds)
        ok = np.where(scores >= 0, 1, -1) == data.y[None, :]
        right[candidate] = ["".join("1" if b else "0" for b in row) for row in ok]
        return scores, chosen

    c = rb._CONDITIONS[name]
    spec = SplitSpec(seed=f"robust-{i}")
    rl = np.asarray(roles(c["signals"], spec))
    test = (rl == "test") & (c["y"] != 0)
    with patch.object(fit_mod, "oof_scores", recording) if oof else nullcontext():
        art = fit_condition(c["signals"], condition=name, spec=spec)
    recs = [r for r, keep in zip(c["signals"], test) if keep]
    yt = c["y"][test]
    cands = art["selection"]["candidates"]
    out = {"condition": name, "split": i, "n_test": int(test.sum()), "head": art["head"],
           "best": float(rb.fair_accuracy(c, test).max()), "fold_acc": {}, "test_acc": {}}
    for kind, params in art["heads"].items():
        s = head_class(kind).from_json(params).score(recs)
        out["test_acc"][kind] = float(np.mean(np.where(s >= 0, 1, -1) == yt))
        if "fold_accuracy" in cands.get(kind, {}):
            out["fold_acc"][kind] = cands[kind]["fold_accuracy"]
    if oof:
        out["oof_right"] = right
    return out


def run_base(args) -> dict:
    """Appends the cells not yet in args.out; -> what it wrote (the JSON line's fields)."""
    done = set()
    if os.path.exists(args.out):
        with open(args.out) as fh:
            done = {(d["condition"], d["split"]) for d in map(json.loads, fh)}
    rb._init(args.data, args.only)
    t0, written, skipped = time.perf_counter(), 0, 0
    with open(args.out, "a") as fh:
        for name in rb._CONDITIONS:
            for i in range(args.first, args.first + args.splits):
                if (name, i) in done:
                    skipped += 1
                    continue
                cell = base_cell(name, i, args.oof)
                fh.write(json.dumps(cell, sort_keys=True) + "\n")
                fh.flush()
                written += 1
                print(f"[{time.perf_counter() - t0:.0f}s] {name} {i} {cell['head']}", file=sys.stderr, flush=True)
    return {"study": "candidate_study base", "out": args.out, "first": args.first, "splits": args.splits,
            "only": args.only, "conditions": len(rb._CONDITIONS), "cells_written": written,
            "cells_already_there": skipped, "wall_s": round(time.perf_counter() - t0, 1)}


def mcnemar_choice(right: dict, order: tuple, bar: float) -> str:
    """The rule's sequential comparisons with the noise of paired pairs instead of folds: per repeat r,
    w_r / l_r = pairs only the candidate / only the current choice gets right out of fold; the candidate
    advances if mean_r (w_r - l_r) > bar * sqrt(mean_r (w_r + l_r)) (McNemar's normal form under no difference)."""
    import numpy as np

    bits = {k: np.array([[c == "1" for c in row] for row in v]) for k, v in right.items()}
    names = [c for c in order if c in bits]
    current = names[0]
    for c in names[1:]:
        w = (bits[c] & ~bits[current]).sum(axis=1)
        l = (bits[current] & ~bits[c]).sum(axis=1)
        if (w - l).mean() > bar * np.sqrt((w + l).mean()):
            current = c
    return current


def rule_pick(cell: dict, order: tuple, bar: float = 2.0, rule: str = "se") -> str:
    import numpy as np

    from baer_fast.selection.rule import se_choice

    fa = {k: np.asarray(v) for k, v in cell["fold_acc"].items()}
    first = order[0].split("|")
    start = max(first, key=lambda k: (fa[k].mean(), -first.index(k)))
    if rule == "mcnemar":
        return mcnemar_choice(cell["oof_right"], (start,) + tuple(order[1:]), bar)
    pick, _ = se_choice(fa, (start,) + tuple(order[1:]), bar)
    return pick


def head_acc(cell: dict, head: str) -> float:
    """Test accuracy of a head; a condition with one routing expert has no router (it is the constant head)."""
    return cell["test_acc"][head if head in cell["test_acc"] or head != "route" else "constant"]


def parse_order(spec) -> tuple[tuple, str, float]:
    """'shrunk,stack,...' (the deployed rule, bar 2) or 'mcnemar@BAR:shrunk,stack,...' -> (order, rule, bar)."""
    if isinstance(spec, tuple):
        return spec, "se", 2.0
    rule, bar = "se", 2.0
    if ":" in spec:
        head, spec = spec.split(":", 1)
        rule, _, b = head.partition("@")
        bar = float(b) if b else 2.0
    return tuple(spec.split(",")), rule, bar


def replay(cells: list[dict], order, bar: float | None = None) -> list[dict]:
    """Cells with 'baer' set to the test accuracy of the head the rule picks (the reference gate kept)."""
    order, rule, parsed_bar = parse_order(order)
    bar = parsed_bar if bar is None else bar
    out = []
    for c in cells:
        pick = "reference" if c["head"] == "reference" else rule_pick(c, order, bar, rule)
        out.append({**c, "pick": pick, "baer": c["test_acc"][pick]})
    return out


def merge(files: list[str]) -> list[dict]:
    """Cells of the first file, with every later file's fold and test accuracies added (same cell key).
    Files may be gzipped (*.gz)."""
    import gzip

    cells = {}
    for k, f in enumerate(files):
        with (gzip.open(f, "rt") if f.endswith(".gz") else open(f)) as fh:
            for d in map(json.loads, fh):
                key = (d["condition"], d["split"])
                if k == 0:
                    cells[key] = d
                elif key in cells:
                    cells[key]["fold_acc"].update(d["fold_acc"])
                    cells[key]["test_acc"].update(d["test_acc"])
    return list(cells.values())


def summary(cells: list[dict]) -> dict:
    import numpy as np

    res = {}
    for name, cs in rb.by_condition(cells).items():
        g = np.array([100 * (c["baer"] - c["best"]) for c in cs])
        res[name] = {"win": float(np.mean(g >= -1e-9)), "mean": float(g.mean()), "worst": float(g.min()),
                     "cells": len(cs), "picks": {p: sum(c["pick"] == p for c in cs) for p in sorted({c["pick"] for c in cs})}}
    return res


def paired(cells: list[dict], orders: list[str], grid: list[str]) -> dict:
    """Cell-by-cell changes of each order against the first: picks changed, wins gained / lost, test
    accuracy higher / lower (exact two-sided sign test); then the share of cells that SOME grid head
    wins, were the head chosen on test (a ceiling no rule on non-test rows can pass). Lines to stderr;
    -> the same figures."""
    from scipy.stats import binomtest

    out = {}
    ref = replay(cells, orders[0])
    for order in orders[1:]:
        alt = replay(cells, order)
        won = [(a["baer"] >= a["best"] - 1e-9, b["baer"] >= b["best"] - 1e-9) for a, b in zip(alt, ref)]
        up = sum(a["baer"] > b["baer"] for a, b in zip(alt, ref))
        down = sum(a["baer"] < b["baer"] for a, b in zip(alt, ref))
        p = binomtest(up, up + down).pvalue if up + down else 1.0
        r = out[order] = {"picks_changed": sum(a["pick"] != b["pick"] for a, b in zip(alt, ref)),
                          "wins_gained": sum(a and not b for a, b in won), "wins_lost": sum(b and not a for a, b in won),
                          "higher": up, "lower": down, "sign_test_p": p}
        print(f"paired {order.replace(',', ' < '):<48} picks changed {r['picks_changed']:3d}"
              f"  wins +{r['wins_gained']}/-{r['wins_lost']}"
              f"  test accuracy higher {up} lower {down} (sign test p = {p:.2f})", file=sys.stderr)
    if grid:
        gaps = [100 * (max(head_acc(c, h) for h in grid) - c["best"]) for c in cells]
        worst = min(range(len(cells)), key=lambda i: gaps[i])
        out["grid_ceiling"] = {"win": sum(g >= -1e-7 for g in gaps) / len(cells), "worst": gaps[worst],
                               "worst_cell": [cells[worst]["condition"], cells[worst]["split"]],
                               "cells_below_minus_3": sum(g < -3 for g in gaps)}
        print(f"test-oracle ceiling over the grid heads: {100 * out['grid_ceiling']['win']:.1f}% "
              f"of cells, worst cell {gaps[worst]:+.1f} ({cells[worst]['condition']}, split {cells[worst]['split']}), "
              f"{sum(g < -3 for g in gaps)} cells below -3 points", file=sys.stderr)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("base")
    b.add_argument("--first", type=int, default=0)
    b.add_argument("--splits", type=int, default=20)
    b.add_argument("--data", default=str(rb.default_root()))
    b.add_argument("--only")
    b.add_argument("--out", required=True)
    b.add_argument("--oof", action="store_true", help="also store each candidate's out-of-fold correctness (oof_right)")
    r = sub.add_parser("replay")
    r.add_argument("files", nargs="+")
    r.add_argument("--order", action="append",
                   help="comma-separated rule order (repeatable); prefix 'mcnemar@BAR:' for the paired-pair noise rule")
    r.add_argument("--grid", help="comma-separated heads, each deployed everywhere")
    r.add_argument("-v", action="store_true", help="per condition as well as pooled")
    r.add_argument("--paired", action="store_true",
                   help="each order against the first, cell by cell; and the test-oracle ceiling of the grid")
    args = ap.parse_args(argv)
    if args.cmd == "base":
        import logging
        logging.getLogger("baer_fast").setLevel(logging.WARNING)
        print(json.dumps(run_base(args)))
        return 0
    cells = merge(args.files)
    if not cells:
        raise SystemExit(f"candidate_study replay: no cell in {args.files[0]} (write one with `candidate_study.py base`)")
    print(f"{len(cells)} cells; columns: win rate, mean gain, worst gain (points), heads picked", file=sys.stderr)
    runs = [(f"always {h}", [{**c, "pick": h, "baer": head_acc(c, h)} for c in cells])
            for h in (args.grid.split(",") if args.grid else [])]
    orders = args.order or ["shrunk,stack,constant,route"]
    runs += [(o.replace(",", " < "), replay(cells, o)) for o in orders]
    result = {"study": "candidate_study replay", "files": args.files, "cells": len(cells), "runs": {}}
    if args.paired:
        result["paired"] = paired(cells, orders, args.grid.split(",") if args.grid else [])
    for label, cs in runs:
        s = result["runs"][label] = summary(cs)
        for name, r in s.items():
            if args.v or name == "POOLED":
                tag = label if name == "POOLED" else f"   {name}"
                print(f"{tag:<56} {100 * r['win']:5.1f}% {r['mean']:+6.2f} {r['worst']:+6.1f}  {r['picks']}",
                      file=sys.stderr)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
