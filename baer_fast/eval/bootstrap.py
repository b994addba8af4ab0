"""Bootstrap confidence intervals of accuracy (scipy.stats.bootstrap, percentile method, seeded).

Each method's per-pair correctness (1/0 on the labelled rows, no prediction = 0) is resampled
`n_resamples` times with a generator seeded by `seed`, so the interval is the same on every run.
"""
from __future__ import annotations

import numpy as np

LEVEL = 0.95
BATCH = 100        # resamples held at once: memory n_pairs x BATCH floats, whatever N is


def _rng_keyword(bootstrap) -> str:
    """scipy < 1.15 names the generator `random_state`; 1.15 added `rng` (SPEC 7) and will retire
    `random_state`. Both draw the same resamples from the same Generator."""
    import inspect

    return "rng" if "rng" in inspect.signature(bootstrap).parameters else "random_state"


def accuracy_interval(correct, *, n_resamples: int, seed: int, level: float = LEVEL) -> dict:
    from scipy.stats import bootstrap

    x = np.asarray(correct, dtype=np.float64)
    out = {"accuracy": float(x.mean()) if len(x) else None, "n": int(len(x)), "level": level,
           "n_resamples": n_resamples, "seed": seed, "method": "percentile"}
    if len(x) < 2 or n_resamples < 1:
        return {**out, "low": None, "high": None}
    res = bootstrap((x,), np.mean, n_resamples=n_resamples, confidence_level=level, method="percentile",
                    vectorized=True, batch=BATCH, **{_rng_keyword(bootstrap): np.random.default_rng(seed)})
    return {**out, "low": float(res.confidence_interval.low), "high": float(res.confidence_interval.high)}


def accuracy_ci(records, scores, experts, rows, *, n_resamples: int, seed: int) -> dict:
    """{"head": interval, "experts": {name: interval}} on the labelled rows `rows`."""
    from baer_fast.eval.metrics import expert_predictions, head_predictions, label_signs

    y = label_signs(records)
    out = {"head": accuracy_interval((head_predictions(scores) == y)[rows], n_resamples=n_resamples, seed=seed),
           "experts": {}}
    if experts:
        pred = expert_predictions(records, experts)
        for k, name in enumerate(experts):
            out["experts"][name] = accuracy_interval((pred[:, k] == y)[rows], n_resamples=n_resamples, seed=seed)
    return out
