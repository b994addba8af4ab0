"""Evidence stacking head (paper Eq. 6): odd logistic model over the stack map phi.

Features are divided by their training RMS; the model is fitted on the
sign-augmented set {(phi, y), (-phi, -y)} with no intercept, so s(Tx) = -s(x)
holds by construction. Knows nothing about files or splits: callers pass the rows.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from baer_fast.features.evidence import EPS, evidence, runs_tensor, stack_feature_names, stack_features

LAMBDAS = (10.0, 1.0, 0.1, 0.01, 0.001)


@dataclass
class StackHead:
    experts: list[str]        # expert order of the feature blocks
    categories: list[str]     # subsets G seen in training (interaction block)
    rms: np.ndarray           # [D] training RMS of each phi dimension (1 where it was 0)
    weights: np.ndarray       # [D] coefficients on phi / rms
    lam: float                # the paper's lambda (sklearn C = 1 / (n_augmented * lambda))
    eps: float = EPS
    kind: str = "stack"

    def features(self, records: Sequence) -> np.ndarray:
        """phi [N, D] for records (signals)."""
        _, _, z, zt = evidence(runs_tensor(records, self.experts), self.eps)
        return stack_features(z, zt, [r.subset for r in records], self.categories)

    def score_features(self, phi: np.ndarray) -> np.ndarray:
        return (phi / self.rms) @ self.weights

    def score(self, records: Sequence) -> np.ndarray:
        return self.score_features(self.features(records))

    def to_json(self) -> dict:
        return {"kind": self.kind, "experts": list(self.experts), "categories": list(self.categories),
                "feature_names": stack_feature_names(self.experts, self.categories),
                "eps": self.eps, "lambda": self.lam,
                "rms": self.rms.tolist(), "weights": self.weights.tolist()}

    @classmethod
    def from_json(cls, d: dict) -> "StackHead":
        return cls(experts=list(d["experts"]), categories=list(d["categories"]),
                   rms=np.asarray(d["rms"], dtype=np.float64),
                   weights=np.asarray(d["weights"], dtype=np.float64),
                   lam=float(d["lambda"]), eps=float(d["eps"]))


def training_rms(phi: np.ndarray) -> np.ndarray:
    r = np.sqrt(np.mean(phi ** 2, axis=0)) if len(phi) else np.ones(phi.shape[1])
    return np.where(r > 0, r, 1.0)


def fit_odd_logistic(x: np.ndarray, y: np.ndarray, lam: float) -> np.ndarray:
    """argmin_w mean_{D+-} log(1 + exp(-t w.v)) + lam/2 |w|^2 over the sign-augmented set.

    y in {+1, -1}. sklearn minimises C * sum(loss) + |w|^2 / 2, so C = 1 / (n_aug * lam).
    """
    from sklearn.linear_model import LogisticRegression

    xa = np.concatenate([x, -x])
    ya = np.concatenate([y, -y])
    model = LogisticRegression(C=1.0 / (len(xa) * lam), fit_intercept=False,
                               solver="lbfgs", tol=1e-10, max_iter=10_000)
    model.fit(xa, ya)
    return model.coef_.ravel().astype(np.float64)


def fit_stack_weights(phi: np.ndarray, y: np.ndarray, lam: float) -> tuple[np.ndarray, np.ndarray]:
    """-> (rms, weights) fitted on these rows."""
    rms = training_rms(phi)
    return rms, fit_odd_logistic(phi / rms, y, lam)


def _accuracy_and_loss(s: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    pred = np.where(s >= 0, 1, -1)
    loss = float(np.mean(np.logaddexp(0.0, -y * s)))
    return float(np.mean(pred == y)), loss


def select_lambda(phi_sel, y_sel, phi_cal, y_cal, lambdas=LAMBDAS) -> tuple[float, list[dict]]:
    """Fit on selection rows for each lambda, score on calibration rows.

    Best calibration accuracy wins; ties go to lower calibration log-loss, then to the
    larger lambda (more regularised), so the choice is deterministic.
    """
    table = []
    for lam in lambdas:
        rms, w = fit_stack_weights(phi_sel, y_sel, lam)
        acc, loss = _accuracy_and_loss((phi_cal / rms) @ w, y_cal)
        table.append({"lambda": lam, "calibration_accuracy": acc, "calibration_logloss": loss})
    best = min(table, key=lambda r: (-r["calibration_accuracy"], round(r["calibration_logloss"], 12),
                                     -r["lambda"]))
    return best["lambda"], table


def fit_stack(records: Sequence, y: np.ndarray, roles: Sequence[str], *, experts: list[str],
              categories: list[str], lambdas=LAMBDAS, eps: float = EPS) -> tuple[StackHead, dict]:
    """Fit on labelled non-test rows: lambda on calibration (fitted on selection), refit on all.

    records/y/roles hold only rows the caller may read (no test rows). y in {+1, -1}.
    """
    probe = StackHead(experts, categories, np.ones(1), np.zeros(1), 0.0, eps)
    phi = probe.features(records)
    sel = np.asarray([r == "selection" for r in roles])
    cal = np.asarray([r == "calibration" for r in roles])
    lam, table = select_lambda(phi[sel], y[sel], phi[cal], y[cal], lambdas)
    rms, w = fit_stack_weights(phi, y, lam)
    head = StackHead(list(experts), list(categories), rms, w, lam, eps)
    return head, {"lambda": lam, "lambda_table": table, "dim": int(phi.shape[1])}
