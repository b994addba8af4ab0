"""Accuracy, coverage, exact McNemar and oracle headroom of a head vs. single experts.

Predictions are +1 (a), -1 (b) or 0 (no prediction: missing evidence or an exact
tie), and 0 counts as an error, as in the paper (Eq. 11). Pairs whose label is a tie
or absent are excluded from accuracy and counted.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
from scipy.stats import binomtest

from baer_fast.features.evidence import evidence, runs_tensor


def label_signs(records: Sequence) -> np.ndarray:
    """[N] +1 for label a, -1 for b, 0 for tie or unlabelled."""
    return np.array([{"a": 1, "b": -1}.get(r.label, 0) for r in records], dtype=np.int64)


def expert_predictions(records: Sequence, experts: Sequence[str]) -> np.ndarray:
    """[N, K] sign(p_k - 0.5) per expert; 0 where the expert is missing or undecided."""
    p, _, _, _ = evidence(runs_tensor(records, experts))
    return np.sign(p - 0.5).astype(np.int64)


def head_predictions(scores: np.ndarray) -> np.ndarray:
    """Eq. 1: a when s >= 0, else b (a head always predicts)."""
    return np.where(np.asarray(scores) >= 0, 1, -1)


def mcnemar_exact(correct_x: np.ndarray, correct_y: np.ndarray) -> dict:
    """Exact two-sided McNemar test on paired correctness vectors."""
    b = int(np.sum(correct_x & ~correct_y))
    c = int(np.sum(~correct_x & correct_y))
    p = 1.0 if b + c == 0 else float(binomtest(b, b + c, 0.5).pvalue)
    return {"x_only": b, "y_only": c, "p_value": p}


def strongest(correct: np.ndarray, names: Sequence[str]) -> tuple[str, float]:
    """The expert with the highest accuracy (ties: first in `names` order)."""
    acc = correct.mean(axis=0) if len(correct) else np.zeros(len(names))
    k = int(np.argmax(acc))
    return names[k], float(acc[k])


def evaluate(records: Sequence, scores: np.ndarray, roles: Sequence[str], *, split: str = "test",
             experts: Sequence[str] | None = None) -> dict:
    """Metrics of `scores` on the rows of `split` ("test", "dev" = non-test, or "all")."""
    experts = list(experts) if experts is not None else sorted({k for r in records for k in r.experts})
    y = label_signs(records)
    roles = np.asarray(roles)
    in_split = {"all": np.ones(len(records), bool), "dev": roles != "test"}.get(split, roles == split)
    dev_rows = (roles != "test") & (y != 0)
    rows = in_split & (y != 0)
    pred_e = expert_predictions(records, experts)
    correct_e = pred_e == y[:, None]
    correct_h = head_predictions(scores) == y
    out = {"split": split, "n_pairs": int(in_split.sum()), "n_scored": int(rows.sum()),
           "n_tie_labels": int(np.sum(in_split & np.array([r.label == "tie" for r in records]))),
           "n_unlabelled": int(np.sum(in_split & np.array([r.label is None for r in records]))),
           "accuracy": float(correct_h[rows].mean()) if rows.any() else float("nan"),
           "coverage": 1.0,
           "experts": {}}
    for k, name in enumerate(experts):
        out["experts"][name] = {"accuracy": float(correct_e[rows, k].mean()) if rows.any() else float("nan"),
                                "coverage": float((pred_e[in_split, k] != 0).mean()) if in_split.any() else float("nan")}
    if experts and rows.any():
        best_test, acc_test = strongest(correct_e[rows], experts)
        best_dev, acc_dev = strongest(correct_e[dev_rows], experts) if dev_rows.any() else (best_test, float("nan"))
        out["strongest_on_test"] = {"expert": best_test, "accuracy": acc_test,
                                    "mcnemar": mcnemar_exact(correct_h[rows], correct_e[rows, experts.index(best_test)])}
        out["strongest_on_dev"] = {"expert": best_dev, "dev_accuracy": acc_dev,
                                   "accuracy": float(correct_e[rows, experts.index(best_dev)].mean()),
                                   "mcnemar": mcnemar_exact(correct_h[rows], correct_e[rows, experts.index(best_dev)])}
        out["oracle_any_expert"] = float(correct_e[rows].any(axis=1).mean())
    return out


def format_table(report: dict, *, title: str = "") -> str:
    """A plain-text table of one evaluation report."""
    lines = [title] if title else []
    lines.append(f"split={report['split']} pairs={report['n_pairs']} scored={report['n_scored']} "
                 f"tie-labels-excluded={report['n_tie_labels']} unlabelled={report['n_unlabelled']}")
    head = report.get("head", "head")
    lines.append(f"  {'method':<44} {'acc':>7} {'cov':>7}")
    lines.append(f"  {'BAER (' + head + ')':<44} {100 * report['accuracy']:7.2f} {100 * report['coverage']:7.2f}")
    for name, m in sorted(report["experts"].items(), key=lambda kv: -kv[1]["accuracy"]):
        lines.append(f"  {name:<44} {100 * m['accuracy']:7.2f} {100 * m['coverage']:7.2f}")
    if "strongest_on_test" in report:
        t, d = report["strongest_on_test"], report["strongest_on_dev"]
        lines.append(f"  strongest single expert on test: {t['expert']} {100 * t['accuracy']:.2f} "
                     f"(McNemar p={t['mcnemar']['p_value']:.3g})")
        lines.append(f"  strongest single expert on dev:  {d['expert']} -> test {100 * d['accuracy']:.2f} "
                     f"(McNemar p={d['mcnemar']['p_value']:.3g})")
        lines.append(f"  any-expert oracle: {100 * report['oracle_any_expert']:.2f}")
    return "\n".join(lines)
