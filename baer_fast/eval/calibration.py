"""Calibration of p_a: expected calibration error, Brier score and log-loss (scikit-learn's).

The head's p_a is sigmoid(score); an expert's is p_k, the mean of its runs (pairs where it has
no run are left out and counted). Only pairs labelled a or b count (tie labels have no truth
value for P(a better)). ECE uses equal-width bins of p_a: sum over bins of n_bin / n times
|mean p_a - frequency of label a| (scikit-learn has no ECE; its Brier and log-loss are used).
"""
from __future__ import annotations

import numpy as np

N_BINS = 10


def reliability(p_a: np.ndarray, is_a: np.ndarray, n_bins: int = N_BINS) -> tuple[list, float]:
    """Equal-width bins (lo, hi, n, mean_p, freq_a) of the non-empty bins, and the ECE."""
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    idx = np.clip(np.digitize(p_a, edges[1:-1]), 0, n_bins - 1)
    bins = []
    for b in range(n_bins):
        m = idx == b
        if m.any():
            bins.append({"lo": float(edges[b]), "hi": float(edges[b + 1]), "n": int(m.sum()),
                         "mean_p": float(p_a[m].mean()), "freq_a": float(is_a[m].mean())})
    n = max(len(p_a), 1)
    return bins, float(sum(b["n"] / n * abs(b["mean_p"] - b["freq_a"]) for b in bins))


def calibration_of(p_a, is_a, *, n_bins: int = N_BINS) -> dict:
    """{n, ece, brier, log_loss, bins} of probabilities p_a against labels (True = a)."""
    from sklearn.metrics import brier_score_loss, log_loss

    p_a, is_a = np.asarray(p_a, dtype=np.float64), np.asarray(is_a, dtype=bool)
    if not len(p_a):
        return {"n": 0, "ece": None, "brier": None, "log_loss": None, "bins": []}
    bins, ece = reliability(p_a, is_a, n_bins)
    return {"n": int(len(p_a)), "ece": ece, "brier": float(brier_score_loss(is_a, p_a)),
            "log_loss": float(log_loss(is_a, p_a, labels=[False, True])), "bins": bins}


def calibration(records, scores, experts, rows) -> dict:
    """{"head": ..., "experts": {name: ...}} on the labelled rows `rows` (bool mask)."""
    from scipy.special import expit

    from baer_fast.eval.metrics import label_signs
    from baer_fast.features.evidence import evidence, runs_tensor

    is_a = label_signs(records) == 1
    out = {"head": calibration_of(expit(np.asarray(scores, dtype=np.float64)[rows]), is_a[rows]), "experts": {}}
    if experts:
        u = runs_tensor(records, experts)
        p, _, _, _ = evidence(u)
        have = ~np.isnan(u).all(-1)
        for k, name in enumerate(experts):
            m = rows & have[:, k]
            out["experts"][name] = calibration_of(p[m, k], is_a[m])
    return out
