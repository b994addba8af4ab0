"""`eval --report DIR`: one self-contained HTML page, and a PNG copy of each plot it shows.

Reads what `evaluate` reads (signals records, head scores, split roles) and the frozen
artifact when given; writes `DIR/report.html` (inline CSS, plots embedded as data: URIs)
and the PNGs beside it, each atomically; a PNG an earlier run left there that this page
does not show is removed. matplotlib is imported here only, with the Agg canvas (no
display, no network, no global backend change).
"""
from __future__ import annotations

import functools
import html
import os
from typing import Sequence

import numpy as np

from baer_fast.eval.bias import position_consistency  # noqa: F401  (re-exported: the report's table)
from baer_fast.eval.calibration import reliability
from baer_fast.eval.html_parts import figure as _figure, img as _img, pct as _pct, save_png as _save_png
from baer_fast.eval.html_parts import table as _table
from baer_fast.eval.metrics import (dev_sentence, expert_predictions, head_predictions, label_signs, mcnemar_exact,
                                    pool_tag, ties_sentence)
from baer_fast.io.jsonl import atomic_open, make_dir

N_BINS = 10
PNG_FILES = ("accuracy_by_subset.png", "reliability.png", "position_consistency.png", "stack_lambda.png",
             "length_bias.png")      # every PNG a report writes (report_sections.py: length_bias)
_CSS = """body{font-family:system-ui,sans-serif;margin:2em;max-width:70em;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:.25em .6em;text-align:right}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}img{max-width:100%;border:1px solid #eee}
.baer{font-weight:bold}pre{background:#f7f7f7;padding:.6em;overflow:auto}"""


def split_mask(roles: Sequence[str], split: str) -> np.ndarray:
    """Rows of `split` as `evaluate` picks them ("dev" = every non-test row)."""
    roles = np.asarray(roles)
    if split == "all":
        return np.ones(len(roles), bool)
    return roles != "test" if split == "dev" else roles == split


def sigmoid(s: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(s, dtype=np.float64)))


def subset_accuracy(records, scores, experts, rows) -> dict:
    """{subset: {method: accuracy}} on labelled rows; method 'BAER' is the head."""
    y = label_signs(records)
    correct = {"BAER": head_predictions(scores) == y}
    pred = expert_predictions(records, experts)
    for k, name in enumerate(experts):
        correct[name] = pred[:, k] == y
    subsets = np.array([r.subset for r in records])
    out = {}
    for g in sorted(set(subsets[rows])):
        m = rows & (subsets == g)
        out[g] = {name: float(c[m].mean()) for name, c in correct.items()}
    return out


def reliability_bins(p_a: np.ndarray, is_a: np.ndarray, n_bins: int = N_BINS) -> dict:
    """Equal-width bins of predicted P(a): mean prediction, observed frequency of 'a', count; ECE."""
    bins, ece = reliability(p_a, is_a, n_bins)
    return {"bins": bins, "ece": ece, "n": int(len(p_a))}


def mcnemar_vs_experts(records, scores, experts, rows) -> dict:
    y = label_signs(records)
    correct_h = (head_predictions(scores) == y)[rows]
    pred = expert_predictions(records, experts)
    return {name: mcnemar_exact(correct_h, (pred[:, k] == y)[rows]) for k, name in enumerate(experts)}


# ---------------------------------------------------------------- plots

def plot_subset_accuracy(acc: dict, baseline: str | None, path: str) -> bytes:
    methods = sorted(next(iter(acc.values())), key=lambda m: (m != "BAER", m != baseline, m)) if acc else []
    fig = _figure(8, 1.2 + 0.32 * len(methods) * max(1, len(acc)) ** 0.5)
    ax = fig.add_subplot()
    height = 0.8 / max(len(acc), 1)
    y = np.arange(len(methods))
    for j, (g, by_m) in enumerate(acc.items()):
        ax.barh(y + j * height, [100 * by_m[m] for m in methods], height=height, label=g)
    labels = [m + (" (strongest baseline)" if m == baseline else "") for m in methods]
    ax.set_yticks(y + height * (len(acc) - 1) / 2, labels)
    ax.invert_yaxis()
    ax.set_xlabel("accuracy (%)")
    ax.set_title("Accuracy per subset: BAER vs. each expert")
    ax.legend(title="subset", fontsize="small", bbox_to_anchor=(1.01, 1), loc="upper left")
    return _save_png(fig, path)


def plot_reliability(rel: dict, path: str) -> bytes:
    fig = _figure(5, 5)
    ax = fig.add_subplot()
    ax.plot([0, 1], [0, 1], ls="--", c="grey", lw=1, label="perfect calibration")
    xs = [b["mean_p"] for b in rel["bins"]]
    ys = [b["freq_a"] for b in rel["bins"]]
    ax.plot(xs, ys, marker="o", label=f"BAER (ECE {rel['ece']:.3f})")
    for b in rel["bins"]:
        ax.annotate(str(b["n"]), (b["mean_p"], b["freq_a"]), fontsize=7, xytext=(3, -9),
                    textcoords="offset points")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("predicted P(a) = σ(score), binned")
    ax.set_ylabel("observed frequency of label a")
    ax.set_title(f"Reliability diagram ({rel['n']} labelled pairs)")
    ax.legend(loc="upper left", fontsize="small")
    return _save_png(fig, path)


def plot_consistency(cons: dict, path: str) -> bytes:
    names = [n for n, c in cons.items() if c["consistency"] is not None]
    fig = _figure(8, 1.2 + 0.3 * max(len(names), 1))
    ax = fig.add_subplot()
    ax.barh(np.arange(len(names)), [100 * cons[n]["consistency"] for n in names])
    ax.set_yticks(np.arange(len(names)), names)
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_xlabel("position consistency (%): both display orders on the same side of 0.5")
    ax.set_title("Position consistency per expert")
    return _save_png(fig, path)


def plot_lambda(table: list, path: str) -> bytes:
    fig = _figure(5, 3.5)
    ax = fig.add_subplot()
    key = "cv_accuracy" if "cv_accuracy" in table[0] else "calibration_accuracy"    # older artifacts
    ax.semilogx([r["lambda"] for r in table], [100 * r[key] for r in table], marker="o")
    ax.set_xlabel("λ")
    ax.set_ylabel("cross-validated accuracy (%)" if key == "cv_accuracy" else "calibration accuracy (%)")
    ax.set_title("Stack head: λ chosen by cross-validation on the non-test rows")
    return _save_png(fig, path)


# ---------------------------------------------------------------- HTML

def _selection_html(art: dict | None) -> str:
    if art is None:
        return "<p>No artifact given (pass <code>--head head.json</code> to show the selection).</p>"
    sel = art.get("selection", {})
    rows = [["condition", art.get("condition")], ["deployed head", art.get("head")],
            ["forced", art.get("forced")], ["experts", len(art.get("experts", []))]]
    rows += _flat_rows("selection", sel) + _flat_rows("fitted_on", art.get("fitted_on", {}))
    return _table(["", "value"], rows)


def _cost_html(cost: dict | None) -> str:
    """The head's cost (`eval`'s report["cost"]: budget subset, cascade and its exits on this split)."""
    if not cost:
        return ""
    rows = [row for key, value in cost.items() for row in _flat_rows(key, value)]
    return "<h2>Cost</h2>" + _table(["", "value"], rows)


def _flat_rows(prefix: str, value) -> list:
    """[[dotted key, scalar]] of a nested artifact field: one table row per leaf, lists of
    scalars joined with commas (no JSON in the cells)."""
    if isinstance(value, dict):
        return [row for k, v in value.items() for row in _flat_rows(f"{prefix}.{k}", v)]
    if isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
        return [row for i, v in enumerate(value) for row in _flat_rows(f"{prefix}[{i}]", v)]
    if isinstance(value, list):
        return [[prefix, ", ".join(_scalar(v) for v in value)]]
    return [[prefix, _scalar(value)]]


def _scalar(v) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def _fair_baseline_html(report: dict) -> str:
    """The headline comparison: strongest external protocol under its stronger reading, McNemar both ways."""
    t = report.get("strongest_baseline")
    if not t:
        return "<p>No external protocol in the baseline pool.</p>"
    ms, mn = t["mcnemar_strict"], t["mcnemar_native"]
    return (f"<p>Strongest baseline: <b>{html.escape(t['expert'])}</b>, {t['reading']} reading, {_pct(t['accuracy'])}% "
            f"(strict {_pct(t['accuracy_strict'])}%, native {_pct(t['accuracy_native'])}%); BAER "
            f"{100 * (report['accuracy'] - t['accuracy']):+.2f} points. Exact McNemar vs. the strict reading: "
            f"p = {ms['p_value']:.3g} ({ms['x_only']}/{ms['y_only']}); exact paired sign-flip test vs. the native "
            f"reading: p = {mn['p_value']:.3g}.{_sentences(report)} Baseline pool: "
            f"{len(report.get('baseline_pool', []))} external protocols; any-baseline oracle "
            f"{_pct(report.get('oracle_any_expert'))}%.</p>")


def _sentences(report: dict) -> str:
    """The text table's lines on pairs scored 0 and on the dev rows' baseline, as sentences."""
    return "".join(f" {html.escape(line[0].upper() + line[1:])}." for line in (ties_sentence(report),
                                                                               dev_sentence(report)) if line)


def write_report(out_dir: str, *, records, scores, roles, report: dict, artifact: dict | None = None,
                 title: str = "") -> str:
    """Write DIR/report.html and its PNGs; return the HTML path."""
    from baer_fast.eval.report_sections import figure_sections

    make_dir(out_dir, field="--report")
    experts = sorted(report["experts"])
    y = label_signs(records)
    in_split = split_mask(roles, report["split"])
    rows = in_split & (y != 0)
    scores = np.asarray(scores, dtype=np.float64)
    baseline = report.get("strongest_baseline", {}).get("expert")

    acc = subset_accuracy(records, scores, experts, rows)
    rel = reliability_bins(sigmoid(scores[rows]), y[rows] == 1)
    cons = position_consistency(records, experts, in_split)
    mc = mcnemar_vs_experts(records, scores, experts, rows)
    at = functools.partial(os.path.join, out_dir)
    png = {"accuracy_by_subset.png": plot_subset_accuracy(acc, baseline, at("accuracy_by_subset.png")),
           "reliability.png": plot_reliability(rel, at("reliability.png")),
           "position_consistency.png": plot_consistency(cons, at("position_consistency.png"))}
    lam = (artifact or {}).get("fit_report", {}).get("stack", {}).get("lambda_table")
    if lam:
        png["stack_lambda.png"] = plot_lambda(lam, at("stack_lambda.png"))

    head = report.get("head", "head")
    method_rows = [[f"BAER ({head})", _pct(report["accuracy"]), _pct(report.get("accuracy_native")),
                    _pct(report["coverage"]), "", ""]]
    for name in sorted(experts, key=lambda n: -report["experts"][n].get("accuracy_fair", report["experts"][n]["accuracy"])):
        m = report["experts"][name]
        tag = " (strongest baseline)" if name == baseline else pool_tag(report, name)
        method_rows.append([name + tag, _pct(m.get("accuracy_strict", m["accuracy"])), _pct(m.get("accuracy_native")),
                            _pct(m["coverage"]), f"{mc[name]['p_value']:.3g}", f"{mc[name]['x_only']}/{mc[name]['y_only']}"])
    cons_rows = [[n, c["n_run_pairs"], c["disagree"], _pct(c["consistency"])] for n, c in cons.items()]
    parts = [
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>baer-fast report</title>"
        f"<style>{_CSS}</style></head><body>",
        f"<h1>baer-fast evaluation</h1><p>{html.escape(title)}</p>",
        f"<p>split <b>{html.escape(report['split'])}</b>: {report['n_pairs']} pairs, {report['n_scored']} "
        f"scored (labelled a/b); {report['n_tie_labels']} tie labels and {report['n_unlabelled']} unlabelled "
        f"excluded from accuracy. Coverage of BAER: {_pct(report['coverage'])}%.</p>", _left_out_html(report),
        "<h2>Accuracy, coverage and McNemar</h2>",
        _table(["method", "strict accuracy %", "native accuracy %", "coverage %", "McNemar p (BAER vs. it, strict)",
                "BAER-only / it-only"], method_rows, bold_first=f"BAER ({head})"),
        _fair_baseline_html(report),
        "<h2>Accuracy per subset</h2>",
        _img("accuracy_by_subset.png", "accuracy per subset", png["accuracy_by_subset.png"]),
        "<h2>Calibration of p_a</h2>", _img("reliability.png", "reliability diagram", png["reliability.png"]),
        f"<p>Expected calibration error: {rel['ece']:.4f} over {rel['n']} pairs, {N_BINS} bins.</p>",
        "<h2>Position consistency</h2>",
        _img("position_consistency.png", "position consistency", png["position_consistency.png"]),
        _table(["expert", "run pairs (ab, ba)", "disagree", "consistency %"], cons_rows),
        *figure_sections(report, out_dir),
        "<h2>Head selection</h2>", _selection_html(artifact), _cost_html(report.get("cost")),
        _img("stack_lambda.png", "stack lambda", png["stack_lambda.png"]) if lam else "",
        "</body></html>\n",
    ]
    path = os.path.join(out_dir, "report.html")
    page = "\n".join(parts)
    with atomic_open(path) as fh:
        fh.write(page)
    for name in PNG_FILES:         # an earlier run's plot that this page does not show
        if f'data-file="{name}"' not in page and os.path.exists(os.path.join(out_dir, name)):
            os.unlink(os.path.join(out_dir, name))
    return path


def _left_out_html(report: dict) -> str:
    left = report.get("left_out")
    if not left:
        return ""
    return (f"<p><b>Left out (--on-error skip):</b> {left['unscored_in_split']} pairs of this split have no score "
            f"({left['unscored']} in all) and {left['bad_records']} bad records were skipped; every figure covers "
            "the scored pairs only.</p>")
