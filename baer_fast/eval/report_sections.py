"""The `eval --report` sections of the figures `eval/figures.py` adds: tables and PNG plots.

Per-subset and per-category accuracy, bootstrap intervals, calibration (ECE, Brier, log-loss),
position bias (first-shown rate, order consistency) and length bias (accuracy by length
difference, "longer wins"), and leaderboard section scores. Each part renders only when its
key is in the report; every value is a table cell or a plot, never raw JSON.
"""
from __future__ import annotations

import html
import os

import numpy as np

from baer_fast.eval.html_parts import figure, img, save_png, table
from baer_fast.eval.html_parts import pct as _pct


def _num(x) -> str:
    return "–" if x is None else f"{x:.4f}"


def _groups(title: str, groups: dict) -> list:
    if not groups:
        return []
    experts = sorted(next(iter(groups.values()))["experts"])
    rows = [[g, v["n"], _pct(v["accuracy"])] + [_pct(v["experts"][e]) for e in experts] for g, v in groups.items()]
    return [f"<h2>Accuracy per {title}: BAER and each expert (%)</h2>", table([title, "n", "BAER %"] + experts, rows)]


def _ci(ci: dict) -> list:
    if not ci:
        return []
    h = ci["head"]
    rows = [["BAER", _pct(h["accuracy"]), _pct(h["low"]), _pct(h["high"])]]
    rows += [[n, _pct(v["accuracy"]), _pct(v["low"]), _pct(v["high"])] for n, v in ci["experts"].items()]
    return [f"<h2>Accuracy with {int(100 * h['level'])}% bootstrap intervals</h2>",
            f"<p>{h['n_resamples']} resamples ({h['method']}), seed {h['seed']}, n = {h['n']}.</p>",
            table(["method", "accuracy %", "low %", "high %"], rows)]


def _calibration(cal: dict) -> list:
    if not cal:
        return []
    rows = [["BAER", cal["head"]["n"], _num(cal["head"]["ece"]), _num(cal["head"]["brier"]),
             _num(cal["head"]["log_loss"])]]
    rows += [[n, v["n"], _num(v["ece"]), _num(v["brier"]), _num(v["log_loss"])] for n, v in cal["experts"].items()]
    return ["<h2>Calibration scores of p_a</h2>", table(["method", "n", "ECE", "Brier", "log-loss"], rows)]


def _bias(b: dict, out_dir: str) -> list:
    if not b:
        return []
    parts = ["<h2>Position bias</h2>"]
    pos = {k: v for k, v in b["position"].items() if v["n_run_pairs"]}
    parts.append(table(["expert", "run pairs", "first-shown rate %", "order consistency %"],
                       [[k, v["n_run_pairs"], _pct(v["first_shown_rate"]), _pct(v["consistency"])]
                        for k, v in pos.items()]) if pos else "<p>No expert has runs in both display orders.</p>")
    length = b["length"]
    parts.append("<h2>Length bias</h2>")
    if not length.get("bins"):
        return parts + ["<p>No response lengths in the signals meta.</p>"]
    lw = length["longer_wins"]
    parts.append(f"<p>'Longer wins' baseline: accuracy {_pct(lw['accuracy'])}%, coverage {_pct(lw['coverage'])}% "
                 f"({length['n_labelled']} labelled pairs with lengths).</p>")
    parts.append(table(["method", "pairs (lengths differ)", "prefers the longer %"],
                       [[k, v["n"], _pct(v["rate"])] for k, v in length["prefers_longer"].items()]))
    methods = list(length["bins"][0]["accuracy"])
    parts.append(table(["(len winner − len loser) / max", "n"] + [f"{m} %" for m in methods],
                       [[f"{x['lo']:+.2f} to {x['hi']:+.2f}", x["n"]] + [_pct(x["accuracy"][m]) for m in methods]
                        for x in length["bins"]]))
    fig = figure(7, 3.5)
    ax = fig.add_subplot()
    centers = np.arange(len(length["bins"]))
    for m in ("BAER", "longer wins"):
        ax.plot(centers, [np.nan if x["accuracy"][m] is None else 100 * x["accuracy"][m] for x in length["bins"]],
                marker="o", label=m)
    ax.set_xticks(centers, [f"{x['lo']:+.2f}..{x['hi']:+.2f}" for x in length["bins"]], fontsize=7)
    ax.set_xlabel("relative length difference, labelled winner minus loser")
    ax.set_ylabel("accuracy (%)")
    ax.legend(fontsize="small")
    png = save_png(fig, os.path.join(out_dir, "length_bias.png"))
    return parts + [img("length_bias.png", "accuracy by length difference", png)]


def _leaderboard(board: dict) -> list:
    if not board:
        return []
    parts = ["<h2>Leaderboard sections</h2>",
             table(["section", "score %"], [[k, _pct(v)] for k, v in board["sections"].items()])]
    if board.get("missing_subsets"):
        parts.append(f"<p>Subsets absent here: {html.escape(', '.join(board['missing_subsets']))}.</p>")
    if board.get("note"):
        parts.append(f"<p>{html.escape(board['note'])}.</p>")
    return parts


def figure_sections(report: dict, out_dir: str) -> list:
    """HTML parts for the figure keys present in `report`; writes their PNGs into out_dir."""
    return (_groups("subset", report.get("per_subset")) + _groups("category", report.get("per_category"))
            + _ci(report.get("accuracy_ci")) + _calibration(report.get("calibration"))
            + _bias(report.get("bias"), out_dir) + _leaderboard(report.get("leaderboard")))
