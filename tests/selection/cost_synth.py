"""Synthetic expert banks with recorded costs, for the budget, cascade and transfer tests."""
from __future__ import annotations

import numpy as np

from baer_fast.io.records import Signals

ACCURACY = {"cheap": 0.80, "mid": 0.78, "pricey": 0.85, "huge": 0.86, "noise": 0.55}
COST = {"cheap": 100, "mid": 150, "pricey": 600, "huge": 900, "noise": 50}


def bank(n: int = 200, *, seed: int = 0, accuracy=ACCURACY, cost=COST, condition: str = "synth") -> list:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        label = "a" if rng.random() < 0.5 else "b"
        sign = 1.0 if label == "a" else -1.0
        experts = {}
        for name, acc in accuracy.items():
            right = rng.random() < acc
            centre = 0.5 + (0.3 if right else -0.3) * sign
            experts[name] = [float(np.clip(centre + rng.normal(0, 0.15), 0.01, 0.99)) for _ in range(2)]
        meta = {"condition": condition,
                "expert_cost": {k: {"prefilled": int(c * rng.uniform(0.8, 1.2)), "decoded": 10} for k, c in cost.items()}}
        out.append(Signals(f"p{i:04d}", experts, label=label, meta=meta))
    return out


def blank_test_labels(records, spec) -> list:
    from baer_fast.io.splits import roles
    return [Signals(r.id, r.experts, r.subset, None if role == "test" else r.label, r.split, r.meta)
            for r, role in zip(records, roles(records, spec))]


def assert_same_saved(tmp_path, a: dict, b: dict) -> None:
    """Both artifacts saved through artifact.save are the same bytes (leak and order tests)."""
    from baer_fast import artifact
    artifact.save(str(tmp_path / "a.json"), a)
    artifact.save(str(tmp_path / "b.json"), b)
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
