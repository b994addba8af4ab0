"""Synthetic labelled signals for head and selection tests (no real data, deterministic)."""
from __future__ import annotations

import random

from baer_fast.io.records import Signals

SUBSETS = ("chat", "math")


def _runs(rng, sign: int, acc: float, conf: float, n: int = 2, missing: float = 0.03) -> list:
    """Runs of an expert that is right with probability `acc`, with confidence about `conf`; each
    run missing with probability `missing` (no draw for it when 0)."""
    vote = sign if rng.random() < acc else -sign
    out = []
    for _ in range(n):
        u = min(1.0, max(0.0, 0.5 + vote * conf + rng.gauss(0, 0.05)))
        out.append(None if missing and rng.random() < missing else round(u, 6))
    return out


def specialist_signals(n: int, *, seed: int = 0, split=None, extra: dict | None = None) -> list[Signals]:
    """Two specialists (`m` right on math, `c` right on chat, coin flips elsewhere), two
    mediocre generalists. Averaging blurs the specialists; routing by subset recovers them.

    extra: {expert name: callable(rng, sign, role) -> runs} for additional experts.
    split: None (id hash) or callable(i) -> explicit role.
    """
    rng = random.Random(seed)
    out = []
    for i in range(n):
        label = rng.choice("ab")
        sign = 1 if label == "a" else -1
        subset = rng.choice(SUBSETS)
        role = split(i) if split else None
        ex = {"m": _runs(rng, sign, 0.97 if subset == "math" else 0.5, 0.4),
              "c": _runs(rng, sign, 0.97 if subset == "chat" else 0.5, 0.4),
              "g1": _runs(rng, sign, 0.68, 0.2), "g2": _runs(rng, sign, 0.66, 0.2)}
        for name, fn in (extra or {}).items():
            ex[name] = fn(rng, sign, role)
        la, lb = rng.randint(10, 900), rng.randint(10, 900)
        meta = {"condition": "synthetic", "len_q": rng.randint(5, 300), "len_a": la, "len_b": lb,
                "code_a": rng.randint(0, 2), "code_b": rng.randint(0, 2), "list_a": rng.randint(0, 5),
                "list_b": rng.randint(0, 5), "digits_a": rng.randint(0, 30), "digits_b": rng.randint(0, 30)}
        out.append(Signals(f"s{i:05d}", ex, subset=subset, label=label, split=role, meta=meta))
    return out


def labels(rows) -> "list[float]":
    return [1.0 if r.label == "a" else -1.0 for r in rows]
