"""Accuracy per subset and per category (the pair's `subset` and optional `category` fields).

Each group: `n` labelled pairs, the head's accuracy and every expert's (no prediction = error,
as in `metrics.evaluate`). Pairs without a category are left out of `per_category`.
"""
from __future__ import annotations

import numpy as np


def group_accuracy(records, scores, experts, rows, key) -> dict:
    from baer_fast.eval.metrics import expert_predictions, head_predictions, label_signs

    y = label_signs(records)
    head = head_predictions(scores) == y
    pe = expert_predictions(records, experts) == y[:, None] if experts else np.zeros((len(records), 0), bool)
    groups = np.array([key(r) if key(r) is not None else "" for r in records], dtype=object)
    out = {}
    for g in sorted({g for g, keep in zip(groups, rows) if keep and g != ""}):
        m = rows & (groups == g)
        out[g] = {"n": int(m.sum()), "accuracy": float(head[m].mean()),
                  "experts": {name: float(pe[m, k].mean()) for k, name in enumerate(experts)}}
    return out


def per_subset(records, scores, experts, rows) -> dict:
    return group_accuracy(records, scores, experts, rows, lambda r: r.subset)


def per_category(records, scores, experts, rows) -> dict:
    return group_accuracy(records, scores, experts, rows, lambda r: getattr(r, "category", None))
