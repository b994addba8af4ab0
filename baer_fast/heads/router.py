"""Candidate-invariant expert routing head (paper Eq. 7): s_rte(x) = z_{k*(x)}(x).

A reliability model R maps each expert's feature row rho_ik to P(expert k is right on
pair i); k* = argmax_k R, ties going to the first expert in the head's fixed (sorted)
expert order. rho is candidate-invariant, so a swap keeps k* and negates z_{k*}.
R is a logistic regression or a depth-5 random forest, compared by cross-validation
over PAIRS (folds from the caller) of routed accuracy, not reliability AUC; the winner
is refitted on all rows it is given. Knows nothing about splits or files: callers pass
only rows they may read.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from baer_fast.features.evidence import EPS, evidence, runs_tensor
from baer_fast.features.reliability import reliability_feature_names, reliability_features, signs
from baer_fast.heads.forest import CompiledForest
from baer_fast.heads.logistic import newton_logistic, rowdot

FOREST_PARAMS = {"n_estimators": 100, "max_depth": 5, "min_samples_leaf": 8, "random_state": 0}
CV_TREES = 16        # trees of the forests fitted inside cross-validation (the deployed one has 100)
LOGISTIC_C = 1.0
MODEL_KINDS = ("logistic", "forest")    # order = tie-break in CV (the simpler model first)


# ---------------------------------------------------------------- reliability models

@dataclass
class LogisticModel:
    """R(rho) = sigmoid(coef . (rho - mean) / scale + intercept)."""
    coef: np.ndarray        # [D]
    intercept: float
    mean: np.ndarray        # [D] training mean of rho
    scale: np.ndarray       # [D] training std of rho (1 where it was 0)
    kind: str = "logistic"

    def predict(self, x: np.ndarray) -> np.ndarray:
        return 1.0 / (1.0 + np.exp(-(rowdot((x - self.mean) / self.scale, self.coef) + self.intercept)))

    def to_json(self) -> dict:
        return {"kind": self.kind, "coef": self.coef.tolist(), "intercept": self.intercept,
                "mean": self.mean.tolist(), "scale": self.scale.tolist()}

    @classmethod
    def from_json(cls, d: dict) -> "LogisticModel":
        return cls(np.asarray(d["coef"], np.float64), float(d["intercept"]),
                   np.asarray(d["mean"], np.float64), np.asarray(d["scale"], np.float64))


@dataclass
class ForestModel:
    forest: CompiledForest
    kind: str = "forest"

    def predict(self, x: np.ndarray) -> np.ndarray:
        return self.forest.predict(x)

    def to_json(self) -> dict:
        return {"kind": self.kind, **self.forest.to_json()}

    @classmethod
    def from_json(cls, d: dict) -> "ForestModel":
        return cls(CompiledForest.from_json(d))


def fit_logistic(x: np.ndarray, t: np.ndarray) -> LogisticModel:
    """sklearn's LogisticRegression(C=LOGISTIC_C) objective on standardised rho, by Newton steps."""
    mean = x.mean(axis=0)
    std = x.std(axis=0)
    scale = np.where(std > 1e-12, std, 1.0)
    if len(np.unique(t)) < 2:      # one class: constant reliability, routing falls to expert order
        return LogisticModel(np.zeros(x.shape[1]), 0.0, mean, scale)
    w = newton_logistic((x - mean) / scale, 2.0 * t - 1.0, 1.0 / (LOGISTIC_C * len(t)), intercept=True)
    return LogisticModel(w[:-1], float(w[-1]), mean, scale)


def fit_forest(x: np.ndarray, t: np.ndarray, n_trees: int | None = None) -> ForestModel:
    from sklearn.ensemble import RandomForestClassifier

    params = dict(FOREST_PARAMS, n_estimators=n_trees or FOREST_PARAMS["n_estimators"])
    m = RandomForestClassifier(n_jobs=None, **params)   # 1 unless a joblib context says more (fit --jobs)
    # sklearn casts to float32 anyway; column-major makes each node's per-feature gather contiguous
    # (about a fifth less time at 100k rows), and the trees are the same: layout changes no arithmetic
    m.fit(np.asfortranarray(x, dtype=np.float32), t)
    if len(m.classes_) < 2:        # one class: constant reliability, like the logistic model
        return LogisticModel(np.zeros(x.shape[1]), 0.0, np.zeros(x.shape[1]), np.ones(x.shape[1]))
    return ForestModel(CompiledForest.from_sklearn(m))


FITTERS = {"logistic": fit_logistic, "forest": fit_forest}
MODELS = {"logistic": LogisticModel, "forest": ForestModel}


# ---------------------------------------------------------------- the head

@dataclass
class RouterHead:
    experts: list[str]       # routing candidates; this order breaks ties in R
    categories: list[str]    # subsets seen in training (one-hot block of rho)
    model: object            # LogisticModel | ForestModel
    eps: float = EPS
    kind: str = "route"
    task_categories: list[str] = field(default_factory=list)   # `category` values (one-hot block)

    def features(self, records: Sequence) -> np.ndarray:
        """rho [N, K, D]."""
        return reliability_features(records, self.experts, self.categories, self.eps, self.task_categories)

    def reliability(self, records: Sequence) -> np.ndarray:
        """R [N, K]: estimated P(expert k is right on the pair)."""
        rho = self.features(records)
        n, k, d = rho.shape
        return self.model.predict(rho.reshape(n * k, d)).reshape(n, k)

    def chosen_index(self, records: Sequence) -> np.ndarray:
        return np.argmax(self.reliability(records), axis=1)    # first maximum: fixed expert order

    def chosen_experts(self, records: Sequence) -> list[str]:
        return [self.experts[k] for k in self.chosen_index(records)]

    def score(self, records: Sequence) -> np.ndarray:
        _, _, z, _ = evidence(runs_tensor(records, self.experts), self.eps)
        k = self.chosen_index(records)
        return z[np.arange(len(records)), k]

    def to_json(self) -> dict:
        out = {"kind": self.kind, "experts": list(self.experts), "categories": list(self.categories),
               "eps": self.eps, "model": self.model.to_json(),
               "feature_names": reliability_feature_names(self.experts, self.categories, self.task_categories)}
        if self.task_categories:
            out["task_categories"] = list(self.task_categories)
        return out

    @classmethod
    def from_json(cls, d: dict) -> "RouterHead":
        mkind = d["model"]["kind"]
        if mkind not in MODELS:
            raise ValueError(f"unknown router model kind {mkind!r}")
        return cls(list(d["experts"]), list(d["categories"]), MODELS[mkind].from_json(d["model"]),
                   float(d["eps"]), task_categories=list(d.get("task_categories", ())))


# ---------------------------------------------------------------- fitting

def routing_targets(records: Sequence, experts: Sequence[str], y: np.ndarray, eps: float = EPS) -> np.ndarray:
    """t [N, K] = 1[sign(p_k - 0.5) == y_i]; an undecided expert counts as wrong."""
    p, _, _, _ = evidence(runs_tensor(records, experts), eps)
    return (signs(p) == y[:, None]).astype(np.int64)


def fit_model(kind: str, rho: np.ndarray, t: np.ndarray, n_trees: int | None = None):
    """Fit R on rho [N, K, D], t [N, K] flattened to pair x expert rows."""
    n, k, d = rho.shape
    x, tt = rho.reshape(n * k, d), t.reshape(n * k)
    return fit_forest(x, tt, n_trees) if kind == "forest" else fit_logistic(x, tt)


def routed_sign(model, rho: np.ndarray, z: np.ndarray) -> np.ndarray:
    """Head prediction (+1 a / -1 b) of the router on rows rho [N, K, D], z [N, K]."""
    n, k, d = rho.shape
    kstar = np.argmax(model.predict(rho.reshape(n * k, d)).reshape(n, k), axis=1)
    return np.where(z[np.arange(n), kstar] >= 0, 1, -1)


def cv_routed_correct(kinds, rho, t, z, y, folds, n_trees: int | None = CV_TREES) -> dict:
    """{kind: [N] bool}: the out-of-fold routed prediction of each reliability model kind is right
    (each fold's rows copied out once for every kind)."""
    correct = {kind: np.zeros(len(y), bool) for kind in kinds}
    for f in np.unique(folds):
        tr, te = folds != f, folds == f
        rho_tr, t_tr, rho_te, z_te, y_te = rho[tr], t[tr], rho[te], z[te], y[te]
        for kind in kinds:
            correct[kind][te] = routed_sign(fit_model(kind, rho_tr, t_tr, n_trees), rho_te, z_te) == y_te
    return correct


def choose_model(rho, t, z, y, folds) -> tuple[str, dict, dict]:
    """LR vs forest by CV routed accuracy over `folds`; ties keep the simpler (first) kind.

    -> (kind, {kind: accuracy}, {kind: [N] bool out-of-fold correctness}).
    """
    correct = cv_routed_correct(MODEL_KINDS, rho, t, z, y, folds)
    table = {kind: float(c.mean()) for kind, c in correct.items()}
    return max(MODEL_KINDS, key=lambda k: table[k]), table, correct


def fit_router(records: Sequence, y: np.ndarray, *, experts: list[str], categories: list[str],
               folds: np.ndarray, eps: float = EPS, task_categories: Sequence[str] = ()) -> tuple[RouterHead, dict]:
    """Compare the reliability models by CV routed accuracy, refit the winner on all rows.

    y in {+1, -1}. Returns (head, info) where info["cv_correct"] is the winner's
    out-of-fold correctness per row.
    """
    rho = reliability_features(records, experts, categories, eps, task_categories)
    _, _, z, _ = evidence(runs_tensor(records, experts), eps)
    t = routing_targets(records, experts, y, eps)
    best, table, correct = choose_model(rho, t, z, y, folds)
    head = RouterHead(list(experts), list(categories), fit_model(best, rho, t), eps,
                      task_categories=list(task_categories))
    info = {"model": best, "cv_routed_accuracy": table, "n_folds": int(len(np.unique(folds))),
            "cv_trees": CV_TREES, "dim": int(rho.shape[2]), "n_rows": int(rho.shape[0] * rho.shape[1]),
            "cv_correct": correct[best]}
    return head, info
