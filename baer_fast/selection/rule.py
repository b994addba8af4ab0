"""The head-choice rule: the steadier head unless a riskier one wins by more than its noise.

Fold accuracies in ([R repeats, F folds] per candidate, all on the same held-out folds),
a decision out. Candidates come in the caller's order, steadiest first (`fit`: shrunk <
stack < constant < route); the current choice starts at the first; each later
candidate replaces it only if its mean paired per-fold gain exceeds BAR standard errors:

    d[r, f] = acc_c[r, f] - acc_current[r, f]
    SE      = sqrt(mean_r var_f(d[r, :], ddof=1) / F)

The SE is the fold-to-fold noise of one F-fold assignment (repeats are averaged, not
counted as independent samples, since they reuse the same rows). BAR = 2 (docs/selection.md
says why not 1).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

BAR = 2.0      # standard errors a later candidate must win by


def paired_gain(acc_c: np.ndarray, acc_s: np.ndarray) -> tuple[float, float]:
    """-> (mean per-fold gain, its standard error) of candidate c over s, [R, F] each."""
    d = np.asarray(acc_c, np.float64) - np.asarray(acc_s, np.float64)
    f = d.shape[1]
    var = d.var(axis=1, ddof=1).mean() if f > 1 else 0.0
    return float(d.mean()), float(np.sqrt(var / f))


def se_choice(fold_acc: dict, order: Sequence[str], bar: float = BAR) -> tuple[str, list[dict]]:
    """-> (chosen candidate, one record per comparison made). Candidates absent from fold_acc are skipped."""
    names = [c for c in order if c in fold_acc]
    current, steps = names[0], []
    for c in names[1:]:
        gain, se = paired_gain(fold_acc[c], fold_acc[current])
        advance = gain > bar * se
        steps.append({"candidate": c, "against": current, "gain": gain, "se": se, "bar": float(bar),
                      "advanced": bool(advance)})
        if advance:
            current = c
    return current, steps


def one_se_choice(fold_acc: dict, order: Sequence[str]) -> tuple[str, list[dict]]:
    """The rule with a one-standard-error bar (bar = 1) instead of BAR."""
    return se_choice(fold_acc, order, 1.0)
