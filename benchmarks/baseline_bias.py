"""How often would a protocol chosen in HINDSIGHT beat the robustness benchmark's baseline? (#18, context)

    python benchmarks/baseline_bias.py [--splits 20] [--first 0] [--only SUBSTR]

`robustness.py` compares the deployed head with the single protocol that is strongest ON TEST (under its
stronger reading), so the baseline is the maximum of K noisy accuracies on 32-230 pairs: it is biased
upward by the choice. This measures that bias without fitting anything. On the same conditions and splits
(`SplitSpec(seed="robust-<i>")`, same pool, same readings), the *hindsight* protocol is the one strongest
on ALL labelled rows of the condition, test rows included: the best any rule choosing one protocol could
hope to pick. Per condition it reports how many cells that protocol wins against the test-chosen one
(gain >= 0, as `robustness.py` counts a win), its mean and worst gain, and the selection bias (test
maximum minus the hindsight protocol's test accuracy, in points). No fitting: a few seconds. Table to
stderr, ONE JSON line to stdout.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import robustness  # noqa: E402  (the benchmark's conditions, pool and readings)


def cells_of(c: dict, name: str, first: int, splits: int) -> list[dict]:
    from baer_fast.io.splits import SplitSpec, roles
    labelled = c["y"] != 0
    hindsight = int(np.argmax(robustness.fair_accuracy(c, labelled)))
    out = []
    for i in range(first, first + splits):
        rl = np.asarray(roles(c["signals"], SplitSpec(seed=f"robust-{i}")))
        fair = robustness.fair_accuracy(c, (rl == "test") & labelled)
        out.append({"condition": name, "split": i, "hindsight": c["pool"][hindsight],
                    "gain": 100 * float(fair[hindsight] - fair.max())})
    return out


def figures(cells: list[dict]) -> dict:
    return {"cells": len(cells), **robustness.gain_figures([c["gain"] for c in cells])}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--splits", type=int, default=20)
    ap.add_argument("--first", type=int, default=0)
    ap.add_argument("--only")
    args = ap.parse_args(argv)
    conds = robustness.load_conditions(robustness.default_root(), args.only)
    cells = [c for name, sig in conds.items()
             for c in cells_of(robustness.prepare(sig), name, args.first, args.splits)]
    summary = {name: figures([c for c in cells if c["condition"] == name]) for name in conds}
    summary["POOLED"] = figures(cells)
    wide = max([len("hindsight protocol")] + [len(c["hindsight"]) for c in cells])
    print(f"{'condition':<42} {'hindsight protocol':<{wide}} {'win':>5} {'mean':>6} {'worst':>6}", file=sys.stderr)
    for name, f in summary.items():
        who = next((c["hindsight"] for c in cells if c["condition"] == name), "")
        print(f"{name:<42} {who:<{wide}} {100 * f['win_rate']:>4.0f}% {f['mean_gain']:>+6.2f} {f['worst_gain']:>+6.1f}",
              file=sys.stderr)
    print(json.dumps({"benchmark": "baseline_bias", "splits": args.splits, "first": args.first, "summary": summary,
                      "cells": cells}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
