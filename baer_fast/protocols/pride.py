"""PriDe (Zheng et al. 2024, "Large language models are not robust multiple choice selectors"),
as a derived expert: a label-free transform of the direct prompt's probabilities.

The observed choice distribution is modelled as a position prior times a debiased content
distribution. Showing a pair in both orders lets each row's prior be estimated without labels:
pi_i(position) is proportional to exp(mean over the two orders of log P(position)). The fitted
prior is the mean of pi_i over the fitting rows (non-test rows; frozen as a JSON dict), and
debiasing divides each order's probabilities by it and renormalises.

Input rows are the direct expert's runs [u_ab, u_ba] (canonical): P_ab(first shown) = u_ab,
P_ba(first shown) = 1 - u_ba. Pure numpy; no torch.
"""
from __future__ import annotations

import numpy as np

NAME = "pride"
SOURCE = "direct"
EPS = 2.0 ** -40     # on the snap grid: clip(1 - u) == 1 - clip(u) exactly


def _complete(rows) -> np.ndarray:
    ok = [r for r in rows if r is not None and len(r) == 2 and None not in r]
    return np.clip(np.asarray(ok, dtype=np.float64).reshape(-1, 2), EPS, 1 - EPS)


def fit(rows) -> dict:
    """rows: direct runs [[u_ab, u_ba], ...] of non-test pairs -> frozen params (plain JSON)."""
    r = _complete(rows)
    if len(r) == 0:
        raise ValueError("pride: no complete direct runs to estimate the position prior from")
    first = np.stack([r[:, 0], 1 - r[:, 1]], axis=1)           # P(first shown) in orders ab, ba
    log_first = np.log(first).mean(axis=1)
    log_second = np.log(1 - first).mean(axis=1)
    pi_first = 1.0 / (1.0 + np.exp(log_second - log_first))     # per-row prior, normalised
    prior = float(np.sort(pi_first).mean())     # sorted: the same bits in any row order
    return {"method": NAME, "source": SOURCE, "prior": [prior, 1.0 - prior], "n_fit": int(len(r))}


def _debias(p_first: float, prior) -> float:
    w1, w2 = p_first / prior[0], (1.0 - p_first) / prior[1]
    return w1 / (w1 + w2)


def apply(params: dict, runs) -> list:
    """Direct runs [u_ab, u_ba] -> PriDe runs [u_ab, u_ba] (canonical; None stays None)."""
    prior = params["prior"]
    u_ab, u_ba = runs
    out_ab = None if u_ab is None else _debias(u_ab, prior)
    # in order ba, a is shown second: its debiased probability is 1 - debiased P(first)
    out_ba = None if u_ba is None else 1.0 - _debias(1.0 - u_ba, prior)
    return [out_ab, out_ba]
