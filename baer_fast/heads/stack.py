"""Evidence stacking head (paper Eq. 6): odd logistic model over the stack map phi.

Features are divided by their training RMS; the model is fitted on the
sign-augmented set {(phi, y), (-phi, -y)} with no intercept, so s(Tx) = -s(x)
holds by construction. lambda is chosen by cross-validation over folds the caller
passes (`cv_lambda`). Three degenerate stacks share the class (any weights on phi / rms
are odd): `mean`, equal weights on the zt columns (no label read); `vote`, weights
logit(acc_k) on them, acc_k each expert's smoothed training accuracy (`vote_weights`);
and `shrunk`, whose ridge pulls toward c times the equal weights instead of toward 0
(`fit_shrunk_weights`), subagged over the parts the caller passes.
Knows nothing about files or splits: callers pass the rows.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from baer_fast.features.evidence import EPS, evidence, runs_tensor, stack_feature_names, stack_features
from baer_fast.heads.logistic import newton_logistic, rowdot

LAMBDAS = (10.0, 1.0, 0.1, 0.01, 0.001)
SHRUNK_LAMBDAS = (100.0, 10.0, 1.0, 0.1, 0.01, 0.001)   # the shrunk stack's grid, strongest pull first
MEAN_SCALE_LAMBDA = 1e-3     # tiny ridge on the one scale c of the mean score: finite on separable rows
RMS_FLOOR = 1e-6             # a phi column below this x the largest column's RMS is numerically zero (training_rms)
VOTE_PRIOR = 1.0             # pseudo-rights and pseudo-errors added to each expert's count (Laplace): finite logits


@dataclass
class StackHead:
    experts: list[str]        # expert order of the feature blocks
    categories: list[str]     # subsets seen in training (interaction block)
    rms: np.ndarray           # [D] training RMS of each phi dimension (1 where it was 0)
    weights: np.ndarray       # [D] coefficients on phi / rms
    lam: float                # the paper's lambda
    eps: float = EPS
    kind: str = "stack"       # "stack" | "mean" | "vote" | "shrunk": how the weights were fitted
    task_categories: list[str] = field(default_factory=list)   # `category` values (second block)

    def features(self, records: Sequence) -> np.ndarray:
        """phi [N, D] for records (signals)."""
        _, _, z, zt = evidence(runs_tensor(records, self.experts), self.eps)
        return stack_features(z, zt, [r.subset for r in records], self.categories,
                              [getattr(r, "category", None) for r in records], self.task_categories)

    def score_features(self, phi: np.ndarray) -> np.ndarray:
        return rowdot(phi / self.rms, self.weights)

    def score(self, records: Sequence) -> np.ndarray:
        return self.score_features(self.features(records))

    def to_json(self) -> dict:
        out = {"kind": self.kind, "experts": list(self.experts), "categories": list(self.categories),
               "feature_names": stack_feature_names(self.experts, self.categories, self.task_categories),
               "eps": self.eps, "lambda": self.lam,
               "rms": self.rms.tolist(), "weights": self.weights.tolist()}
        if self.task_categories:
            out["task_categories"] = list(self.task_categories)
        return out

    @classmethod
    def from_json(cls, d: dict) -> "StackHead":
        return cls(experts=list(d["experts"]), categories=list(d["categories"]),
                   rms=np.asarray(d["rms"], dtype=np.float64),
                   weights=np.asarray(d["weights"], dtype=np.float64),
                   lam=float(d["lambda"]), eps=float(d["eps"]), kind=str(d.get("kind", "stack")),
                   task_categories=list(d.get("task_categories", ())))


def training_rms(phi: np.ndarray) -> np.ndarray:
    """[D] RMS of each phi column over the training rows; 1 for a column that is numerically zero.

    A column whose RMS is below RMS_FLOOR x the largest column's holds rounding, not evidence (e.g. an
    expert whose every run is 1/2 to 1e-11): dividing by its RMS would blow the 1-ulp error of
    logit(1 - u) against -logit(u) up by 1e10 and break the swap's negation far beyond the head's own
    rounding. Such a column is left unscaled, so it stays ~0 and the ridge keeps its weight small."""
    r = np.sqrt(np.mean(phi ** 2, axis=0)) if len(phi) else np.ones(phi.shape[1])
    top = float(np.max(r)) if r.size else 0.0
    return np.where(r > RMS_FLOOR * top, r, 1.0) if top > 0 else np.ones_like(r)


def fit_odd_logistic(x: np.ndarray, y: np.ndarray, lam: float, w0: np.ndarray | None = None) -> np.ndarray:
    """argmin_w mean_{D+-} log(1 + exp(-t w.v)) + lam/2 |w|^2 over the sign-augmented set.

    y in {+1, -1}. Each augmented copy (-v, -t) has the loss of (v, t), so the mean over
    D+- equals the mean over D: the no-intercept Newton solve on the rows themselves.
    """
    return newton_logistic(x, y, lam, intercept=False, w0=w0)


def fit_stack_weights(phi: np.ndarray, y: np.ndarray, lam: float,
                      w0: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """-> (rms, weights) fitted on these rows."""
    rms = training_rms(phi)
    return rms, fit_odd_logistic(phi / rms, y, lam, w0)


def lambda_path_scores(phi_tr, y_tr, phi_te, lambdas=LAMBDAS) -> np.ndarray:
    """[len(lambdas), N_te] held-out scores, fitted along the path (largest lambda first, warm starts)."""
    rms = training_rms(phi_tr)
    order = sorted(range(len(lambdas)), key=lambda j: -lambdas[j])
    out, w = np.zeros((len(lambdas), len(phi_te))), None
    for j in order:
        w = fit_odd_logistic(phi_tr / rms, y_tr, lambdas[j], w)
        out[j] = (phi_te / rms) @ w
    return out


def cv_lambda(phi: np.ndarray, y: np.ndarray, folds: np.ndarray, lambdas=LAMBDAS) -> tuple[float, list[dict]]:
    """Choose lambda by cross-validation over `folds` of these rows.

    Best CV accuracy (Eq. 1) wins; ties go to lower CV log-loss, then to the larger
    lambda (more regularised), so the choice is deterministic.
    """
    table = _cv_table(phi, y, folds, lambdas, lambda_path_scores)
    best = min(table, key=lambda r: (-r["cv_accuracy"], round(r["cv_logloss"], 12), -r["lambda"]))
    return best["lambda"], table


def oof_path_scores(phi, y, folds, lambdas, path) -> np.ndarray:
    """[len(lambdas), N] held-out scores over `folds` of `path(phi_tr, y_tr, phi_te, lambdas)` -> [L, N_te]."""
    s = np.zeros((len(lambdas), len(y)))
    for f in np.unique(folds):
        tr, te = folds != f, folds == f
        s[:, te] = path(phi[tr], y[tr], phi[te], lambdas)
    return s


def _cv_table(phi, y, folds, lambdas, path) -> list[dict]:
    """Per lambda, CV accuracy (Eq. 1) and log-loss of `path(phi_tr, y_tr, phi_te, lambdas)`'s
    held-out scores over `folds`."""
    s = oof_path_scores(phi, y, folds, lambdas, path)
    return [{"lambda": lam, "cv_accuracy": float(np.mean(np.where(s[j] >= 0, 1, -1) == y)),
             "cv_logloss": float(np.mean(np.logaddexp(0.0, -y * s[j])))} for j, lam in enumerate(lambdas)]


# ---------------------------------------------------------------- mean and shrunk stacks

def mean_direction(n_experts: int, dim: int) -> np.ndarray:
    """e [D]: 1/K on each zt_k column of phi, 0 elsewhere, so (phi / rms) @ e = mean_k zt_k / r(zt_k)."""
    e = np.zeros(dim)
    e[1:2 * n_experts:2] = 1.0 / n_experts
    return e


def mean_weights(phi: np.ndarray, n_experts: int) -> tuple[np.ndarray, np.ndarray]:
    """-> (rms, e): the equal-weight mean of the RMS-scaled zt; reads no label."""
    return training_rms(phi), mean_direction(n_experts, phi.shape[1])


def expert_accuracy(phi: np.ndarray, y: np.ndarray, n_experts: int, prior: float = VOTE_PRIOR) -> np.ndarray:
    """[K] smoothed Eq. 1 accuracy of each expert's zt column: (right + prior) / (N + 2 prior), in (0, 1)."""
    zt = phi[:, 1:2 * n_experts:2]
    right = (np.where(zt >= 0, 1.0, -1.0) == np.asarray(y)[:, None]).sum(axis=0)
    return (right + prior) / (len(y) + 2.0 * prior)


def vote_weights(phi: np.ndarray, y: np.ndarray, n_experts: int,
                 prior: float = VOTE_PRIOR) -> tuple[np.ndarray, np.ndarray]:
    """-> (rms, w): w = max(logit acc_k, 0) on each zt column, normalised to sum 1, 0 elsewhere.

    The weighted majority vote that is optimal for independent experts of known accuracy
    (each vote weighted by its log-odds of being right), on the RMS-scaled zt instead of
    the bare sign. An expert no better than a coin on these rows gets weight 0; if every
    expert is, the weights are the mean's (1/K each), so the score is never identically 0.
    """
    rms = training_rms(phi)
    acc = expert_accuracy(phi, y, n_experts, prior)
    lo = np.maximum(np.log(acc) - np.log1p(-acc), 0.0)
    if not np.any(lo > 0):
        return rms, mean_direction(n_experts, phi.shape[1])
    w = np.zeros(phi.shape[1])
    w[1:2 * n_experts:2] = lo / lo.sum()
    return rms, w


def _shrunk_prior(x: np.ndarray, y: np.ndarray, n_experts: int) -> tuple[np.ndarray, np.ndarray]:
    """-> (c e, c e . x): the prior weights (the mean, scaled by its own odd 1-D logistic fit)."""
    e = mean_direction(n_experts, x.shape[1])
    c = fit_odd_logistic((x @ e)[:, None], y, MEAN_SCALE_LAMBDA)[0]
    return c * e, x @ (c * e)


def fit_shrunk_weights(phi: np.ndarray, y: np.ndarray, lam: float, n_experts: int,
                       parts: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """-> (rms, w) with w = argmin mean_i log(1 + exp(-y_i w.x_i)) + lam/2 |w - c e|^2, x = phi / rms.

    Written as w = c e + v: v is a plain odd ridge fit with the prior score as an offset.
    Large lam returns the scaled mean, small lam the unpenalised stack.
    parts ([N] part of each row; None or a single part: the plain fit) subags it: the fit on the rows
    outside each part, weights averaged. rms is that of all rows, so every fit sees the same features;
    a mean of odd models is odd, and averaging fits on overlapping four-fifths lowers the weights'
    sampling noise.
    """
    rms = training_rms(phi)
    x = phi / rms

    def fit(keep):
        prior, off = _shrunk_prior(x[keep], y[keep], n_experts)
        return prior + newton_logistic(x[keep], y[keep], lam, intercept=False, offset=off)

    names = np.unique(parts) if parts is not None else ()
    if len(names) < 2:                        # one part has no complement: the plain fit
        return rms, fit(slice(None))
    return rms, np.mean([fit(parts != f) for f in names], axis=0)


def shrunk_path_scores(phi_tr, y_tr, phi_te, n_experts: int, lambdas=SHRUNK_LAMBDAS) -> np.ndarray:
    """[len(lambdas), N_te] held-out scores along the path (strongest pull first, warm starts)."""
    rms = training_rms(phi_tr)
    x = phi_tr / rms
    prior, off = _shrunk_prior(x, y_tr, n_experts)
    out, v = np.zeros((len(lambdas), len(phi_te))), None
    for j in sorted(range(len(lambdas)), key=lambda j: -lambdas[j]):
        v = newton_logistic(x, y_tr, lambdas[j], intercept=False, w0=v, offset=off)
        out[j] = (phi_te / rms) @ (prior + v)
    return out


def cv_shrunk_lambda(phi: np.ndarray, y: np.ndarray, folds: np.ndarray, n_experts: int,
                     lambdas=SHRUNK_LAMBDAS) -> tuple[float, list[dict]]:
    """lambda of the shrunk stack by CV log-loss over `folds` (a proper score: steadier than
    accuracy on small folds); ties go to the larger lambda (closer to the mean)."""
    table = _cv_table(phi, y, folds, lambdas,
                      lambda p_tr, y_tr, p_te, lams: shrunk_path_scores(p_tr, y_tr, p_te, n_experts, lams))
    best = min(table, key=lambda r: (round(r["cv_logloss"], 12), -r["lambda"]))
    return best["lambda"], table
