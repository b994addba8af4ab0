"""Position and length bias of the head and of each expert.

Position (per expert with paired runs (u_ab, u_ba)): `first_shown_rate`, how often a decided run
(u != 0.5) picks the response shown first (a in order ab: u_ab > 0.5; b in order ba: u_ba < 0.5),
0.5 = no position preference; `consistency`, how often the two orders fall on the same side of
0.5 (both 0.5 agree; a missing run is not counted). Length (character lengths len_a/len_b of the
pair meta): how often each method prefers the longer response, accuracy by bins of the relative
length difference (len(labelled winner) - len(loser)) / max of the two, and the "longer wins"
baseline (no prediction on equal lengths, counted as an error like any missing prediction).
"""
from __future__ import annotations

import numpy as np

# bins of (len_winner - len_loser) / max(len_winner, len_loser), in [-1, 1]
LENGTH_EDGES = (-1.0, -0.5, -0.2, -0.05, 0.05, 0.2, 0.5, 1.0)


def position_consistency(records, experts, rows) -> dict:
    """Per expert: run pairs, disagreements, consistency, first-shown rate (None where no run pairs)."""
    from baer_fast.features.evidence import run_counts, runs_tensor

    u, listed = runs_tensor(records, experts), run_counts(records, experts)       # [N, K, M], [N, K]
    if u.shape[-1] % 2:
        u = np.concatenate([u, np.full(u.shape[:-1] + (1,), np.nan)], axis=-1)
    paired = np.asarray(rows, bool)[:, None] & (listed >= 2) & (listed % 2 == 0)    # an odd run list has no pairs
    ab, ba = u[..., 0::2], u[..., 1::2]                                             # [N, K, M/2] each
    both = paired[:, :, None] & ~np.isnan(ab) & ~np.isnan(ba)
    n = both.sum(axis=(0, 2))
    n_dis = (both & (np.sign(ab - 0.5) != np.sign(ba - 0.5))).sum(axis=(0, 2))
    n_dec = (both & (ab != 0.5)).sum(axis=(0, 2)) + (both & (ba != 0.5)).sum(axis=(0, 2))
    n_first = (both & (ab > 0.5)).sum(axis=(0, 2)) + (both & (ba < 0.5)).sum(axis=(0, 2))
    out = {}
    for k, name in enumerate(experts):
        out[name] = {"n_run_pairs": int(n[k]), "disagree": int(n_dis[k]),
                     "consistency": float(1.0 - n_dis[k] / n[k]) if n[k] else None,
                     "first_shown_rate": float(n_first[k] / n_dec[k]) if n_dec[k] else None}
    return out


def lengths(records) -> tuple[np.ndarray, np.ndarray]:
    """[N] len_a, len_b from the meta (NaN where absent)."""
    def get(r, k):
        v = r.meta.get(k)
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else np.nan
    return (np.array([get(r, "len_a") for r in records]), np.array([get(r, "len_b") for r in records]))


def length_bias(records, predictions: dict, rows) -> dict:
    """predictions: method -> [N] +1/-1/0. Rows: bool mask of the split's rows (labelled or not)."""
    from baer_fast.eval.metrics import label_signs

    la, lb = lengths(records)
    have = rows & ~np.isnan(la) & ~np.isnan(lb)
    longer = np.sign(np.nan_to_num(la - lb)).astype(np.int64)     # +1: a is longer
    y = label_signs(records)
    labelled = have & (y != 0)
    out = {"n_pairs": int(have.sum()), "n_labelled": int(labelled.sum()), "prefers_longer": {}}
    if not have.any():
        return {**out, "longer_wins": None, "bins": []}
    differ = have & (longer != 0)
    for name, pred in predictions.items():
        m = differ & (pred != 0)
        out["prefers_longer"][name] = {"n": int(m.sum()), "rate": float((pred[m] == longer[m]).mean()) if m.any() else None}
    out["longer_wins"] = {"accuracy": float((longer[labelled] == y[labelled]).mean()) if labelled.any() else None,
                          "coverage": float((longer[have] != 0).mean())}
    out["bins"] = _length_bins(la, lb, y, labelled, {**predictions, "longer wins": longer})
    return out


def _length_bins(la, lb, y, labelled, predictions: dict) -> list:
    w_len = np.where(y == 1, la, lb)
    l_len = np.where(y == 1, lb, la)
    d = (w_len - l_len) / np.maximum(np.maximum(w_len, l_len), 1.0)
    idx = np.clip(np.digitize(d, LENGTH_EDGES[1:-1]), 0, len(LENGTH_EDGES) - 2)
    bins = []
    for b in range(len(LENGTH_EDGES) - 1):
        m = labelled & (idx == b)
        bins.append({"lo": LENGTH_EDGES[b], "hi": LENGTH_EDGES[b + 1], "n": int(m.sum()),
                     "accuracy": {name: float((p[m] == y[m]).mean()) if m.any() else None
                                  for name, p in predictions.items()}})
    return bins


def bias(records, scores, experts, in_split) -> dict:
    """{"position": per expert, "length": length_bias of the head ("BAER") and the experts}."""
    from baer_fast.eval.metrics import expert_predictions, head_predictions

    preds = {"BAER": head_predictions(scores)}
    if experts:
        pe = expert_predictions(records, experts)
        preds.update({name: pe[:, k] for k, name in enumerate(experts)})
    return {"position": position_consistency(records, experts, in_split),
            "length": length_bias(records, preds, in_split)}
