"""One protocol on its own: the constant head (s = z_k), the baseline pool and the two readings.

- `ConstantHead`: always the same expert k, s(x) = z_k(x) (the degenerate router of
  Eq. 7 whose reliability model prefers k everywhere); odd by construction.
- `baseline_pool`: the external protocols a head is compared with (paper Sec. 3.1):
  every expert except BAER's own internal ones, unless the caller names the pool.
- Two readings of a single protocol on labelled rows (y = +1 a / -1 b):
  strict (the paper's Eq. 11): the sign of p_k - 0.5, an undecided or missing expert is
  an error; native: each run (display order, sample) judged on its own, credit = share
  of the expert's runs whose sign is right (half credit when two orders disagree; a
  missing or undecided run earns nothing). No labels are read by the head itself.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from baer_fast.features.evidence import EPS, evidence, run_counts, runs_tensor

INTERNAL_EXPERTS = ("reference", "pointwise", "deliberate")


def baseline_pool(experts: Iterable[str], *, internal: Iterable[str] = (),
                  baselines: Sequence[str] | None = None) -> list[str]:
    """Sorted external protocols: `baselines` if given (each must be an expert), else all experts
    but INTERNAL_EXPERTS and `internal`."""
    present = sorted(set(experts))
    if baselines is not None:
        unknown = [b for b in baselines if b not in present]
        if unknown:
            raise ValueError(f"baseline {unknown[0]!r} is not an expert (experts: {', '.join(present)})")
        return sorted(set(baselines))
    drop = set(INTERNAL_EXPERTS) | set(internal)
    return [e for e in present if e not in drop]


def check_internal(names: Iterable[str], records: Sequence, path) -> None:
    """--internal names must be experts of the signals (a typo would leave a protocol in the baseline
    pool unnoticed): InputError naming the first that is not."""
    from baer_fast.errors import InputError

    present = sorted({k for r in records for k in r.experts})
    for name in names:
        if name not in present:
            raise InputError(f"{name!r} is not an expert of the signals (experts: {', '.join(present)})",
                             path=path, field="--internal")


def strict_correct(records: Sequence, experts: Sequence[str], y: np.ndarray, eps: float = EPS) -> np.ndarray:
    """[N, K] bool: sign(p_k - 0.5) == y; undecided (p = 0.5) or missing counts as wrong."""
    p, _, _, _ = evidence(runs_tensor(records, experts), eps)
    return np.sign(p - 0.5) == np.asarray(y)[:, None]


def native_credit(records: Sequence, experts: Sequence[str], y: np.ndarray) -> np.ndarray:
    """[N, K] float in [0, 1]: share of the expert's runs on the pair whose own sign is right.

    Every run the record lists counts (a null or exactly-0.5 run earns 0); an expert the
    record lacks earns 0.
    """
    u, listed = runs_tensor(records, experts), run_counts(records, experts)      # [N, K, M], [N, K]
    right = (np.sign(u - 0.5) == np.asarray(y)[:, None, None]).sum(axis=-1)     # NaN (null, absent) is never right
    return np.where(listed > 0, right / np.maximum(listed, 1), 0.0)


@dataclass
class ConstantHead:
    """s(x) = z_k(x) for one fixed expert k, chosen without test labels by the caller."""
    expert: str
    eps: float = EPS
    kind: str = "constant"

    @property
    def experts(self) -> list[str]:
        return [self.expert]

    def score(self, records: Sequence) -> np.ndarray:
        _, _, z, _ = evidence(runs_tensor(records, [self.expert]), self.eps)
        return z[:, 0]

    def chosen_experts(self, records: Sequence) -> list[str]:
        return [self.expert] * len(records)

    def to_json(self) -> dict:
        return {"kind": self.kind, "expert": self.expert, "eps": self.eps}

    @classmethod
    def from_json(cls, d: dict) -> "ConstantHead":
        return cls(str(d["expert"]), float(d["eps"]))
