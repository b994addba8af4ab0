"""Nested, repeated cross-validation of the candidate heads on the same out-of-fold rows.

Arrays in (built once from the non-test rows by `dev_data`), out-of-fold scores out.
Every candidate is fitted on the same training folds and scored on the same held-out
fold, its hyper-parameters chosen inside the training folds only (inner folds): mean (equal
weights on the RMS-scaled zt, no label read); vote (weights logit of each expert's smoothed
accuracy on the training folds, `heads.stack.vote_weights`); shrunk (the stack pulled toward c times the
mean, lambda by inner CV log-loss); stack (lambda by inner CV, `heads.stack.cv_lambda`);
constant (the stack expert whose Eq. 1 prediction is most often right on the training
folds, ties: first name, s = z_k); route (LR vs forest by inner CV routed accuracy).

Fold assignments hash the ids with the repeat index (balanced blocks), so they depend on
neither row order nor labels. `oof_scores` is the reusable entry point (any expert subset:
build `dev_data` on it).
"""
from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from baer_fast.features.evidence import EPS, evidence, runs_tensor, stack_features
from baer_fast.features.reliability import reliability_features
from baer_fast.heads.router import CV_TREES, choose_model, fit_model, routing_targets
from baer_fast.io.splits import split_key
from baer_fast.heads.stack import (LAMBDAS, cv_lambda, cv_shrunk_lambda, fit_shrunk_weights, fit_stack_weights,
                                   mean_weights, vote_weights)

N_FOLDS = 5
N_REPEATS = 2
INNER_FOLDS = 3
BAG_PARTS = 5        # the shrunk stack is the mean of its fits on the 5 four-fifths of its rows
SALT = "baer-nested"
RULE_ORDER = ("shrunk", "stack", "constant", "route")    # steadiest first: the order of the selection rule
CANDIDATES = ("mean", "vote") + RULE_ORDER     # all compared out of fold; mean and vote are reported


def fold_assignments(ids: Sequence[str], n_folds: int = N_FOLDS, repeats: int = N_REPEATS,
                     salt: str = SALT) -> np.ndarray:
    """[repeats, N] fold of each id: the distinct ids ordered by sha256(salt:repeat:id), cut into
    balanced blocks. Rows given the same key (io.splits.split_key: a split group) share a fold;
    with distinct keys every row is its own block member, as before groups existed."""
    distinct = list(dict.fromkeys(ids))
    if len(distinct) == len(ids):                      # every key distinct: the usual case
        where = np.arange(len(ids))
    else:                                              # each row's index into `distinct`
        index = {k: j for j, k in enumerate(distinct)}
        where = np.asarray([index[k] for k in ids], np.int64)
    out = np.empty((repeats, len(ids)), np.int64)
    for r in range(repeats):
        keys = [hashlib.sha256(f"{salt}:{r}:{k}".encode("utf-8")).digest() for k in distinct]
        order = np.asarray(sorted(range(len(distinct)), key=keys.__getitem__), np.int64)
        fold = np.empty(len(distinct), np.int64)
        for f, block in enumerate(np.array_split(order, min(n_folds, max(len(distinct), 1)))):
            fold[block] = f
        out[r] = fold[where]
    return out


@dataclass
class DevData:
    """Everything the candidates need about the labelled non-test rows, as arrays."""
    ids: list[str]
    y: np.ndarray                 # [N] +1 a / -1 b
    stack_experts: list[str]
    route_experts: list[str]
    z: np.ndarray                 # [N, K] z of the stack experts
    phi: np.ndarray               # [N, D] stack map (Eq. 5)
    rho: np.ndarray               # [N, K', Dr] router reliability features
    zr: np.ndarray                # [N, K'] z of the routing experts
    t: np.ndarray                 # [N, K'] routing targets
    memo: dict = field(default_factory=dict, repr=False, compare=False)   # inner folds per training set


def dev_data(rows: Sequence, y: np.ndarray, *, stack_experts: Sequence[str], route_experts: Sequence[str],
             categories: Sequence[str], task_categories: Sequence[str] = (), eps: float = EPS) -> DevData:
    _, _, z, zt = evidence(runs_tensor(rows, stack_experts), eps)
    phi = stack_features(z, zt, [r.subset for r in rows], categories,
                         [getattr(r, "category", None) for r in rows], task_categories)
    _, _, zr, _ = evidence(runs_tensor(rows, route_experts), eps)
    rho = reliability_features(rows, route_experts, categories, eps, task_categories)
    return DevData([split_key(r) for r in rows], np.asarray(y, np.float64), list(stack_experts), list(route_experts),
                   z, phi, rho, zr, routing_targets(rows, route_experts, y, eps))


def one_blas_thread(fn):
    """Run fn with BLAS on one thread (fit, the budget search): their thousands of small solves only lose
    to threads (on 2 busy cores a 5k-pair frontier took 116 s instead of 22 s), and one thread gives the
    same sums, so the same figures, on any number of cores."""
    @functools.wraps(fn)
    def run(*args, **kw):
        from threadpoolctl import threadpool_limits
        with threadpool_limits(limits=1, user_api="blas"):
            return fn(*args, **kw)
    return run


def inner_folds(data: DevData, idx: np.ndarray, n_folds: int = INNER_FOLDS) -> np.ndarray:
    """[len(idx)] inner fold of each training row; hashed once per training set (shrunk, stack and route
    share an outer fold's), kept read-only in data.memo."""
    key = ("inner", n_folds, np.asarray(idx, np.int64).tobytes())
    if key not in data.memo:
        folds = fold_assignments([data.ids[i] for i in idx], n_folds, 1, SALT + ":inner")[0]
        folds.setflags(write=False)
        data.memo[key] = folds
    return data.memo[key]


def best_constant(z: np.ndarray, y: np.ndarray) -> int:
    """Index of the expert whose Eq. 1 prediction is most often right (first on ties)."""
    right = (np.where(z >= 0, 1, -1) == y[:, None]).mean(axis=0)
    return int(np.argmax(right))


def constant_scores(data: DevData, tr: np.ndarray, te: np.ndarray) -> tuple[np.ndarray, dict]:
    k = best_constant(data.z[tr], data.y[tr])
    return data.z[te, k], {"expert": data.stack_experts[k]}


def mean_scores(data: DevData, tr: np.ndarray, te: np.ndarray) -> tuple[np.ndarray, dict]:
    rms, w = mean_weights(data.phi[tr], data.z.shape[1])
    return (data.phi[te] / rms) @ w, {}


def vote_scores(data: DevData, tr: np.ndarray, te: np.ndarray) -> tuple[np.ndarray, dict]:
    rms, w = vote_weights(data.phi[tr], data.y[tr], data.z.shape[1])
    return (data.phi[te] / rms) @ w, {}


def bag_parts(ids: Sequence[str]) -> np.ndarray:
    """[N] the shrunk stack's subagging parts: BAG_PARTS id-hashed blocks (heads.stack.fit_shrunk_weights)."""
    return fold_assignments(ids, BAG_PARTS, 1, SALT + ":bag")[0]


def shrunk_scores(data: DevData, tr: np.ndarray, te: np.ndarray) -> tuple[np.ndarray, dict]:
    k = data.z.shape[1]
    lam, _ = cv_shrunk_lambda(data.phi[tr], data.y[tr], inner_folds(data, tr), k)
    rms, w = fit_shrunk_weights(data.phi[tr], data.y[tr], lam, k, bag_parts([data.ids[i] for i in tr]))
    return (data.phi[te] / rms) @ w, {"lambda": lam}


def stack_scores(data: DevData, tr: np.ndarray, te: np.ndarray, lambdas=LAMBDAS) -> tuple[np.ndarray, dict]:
    lam, _ = cv_lambda(data.phi[tr], data.y[tr], inner_folds(data, tr), lambdas)
    rms, w = fit_stack_weights(data.phi[tr], data.y[tr], lam)
    return (data.phi[te] / rms) @ w, {"lambda": lam}


def route_scores(data: DevData, tr: np.ndarray, te: np.ndarray) -> tuple[np.ndarray, dict]:
    rho_tr, t_tr, rho_te = data.rho[tr], data.t[tr], data.rho[te]      # each copied out once
    kind, _, _ = choose_model(rho_tr, t_tr, data.zr[tr], data.y[tr], inner_folds(data, tr))
    model = fit_model(kind, rho_tr, t_tr, CV_TREES)
    n, k, d = rho_te.shape
    kstar = np.argmax(model.predict(rho_te.reshape(n * k, d)).reshape(n, k), axis=1)
    return data.zr[te][np.arange(n), kstar], {"model": kind}


FITTERS: dict[str, Callable] = {"mean": mean_scores, "vote": vote_scores, "shrunk": shrunk_scores, "stack": stack_scores,
                                "constant": constant_scores, "route": route_scores}


def oof_scores(data: DevData, candidate: str, folds: np.ndarray,
               on_fold: Callable[[], None] | None = None) -> tuple[np.ndarray, list]:
    """[R, N] out-of-fold signed scores of one candidate, and the hyper-parameters chosen per fold.
    on_fold: called after each fold's fit (progress of long fits)."""
    fit = FITTERS[candidate]
    out, chosen = np.zeros(folds.shape), []
    for r in range(folds.shape[0]):
        for f in np.unique(folds[r]):
            tr, te = np.flatnonzero(folds[r] != f), np.flatnonzero(folds[r] == f)
            out[r, te], info = fit(data, tr, te)
            chosen.append(info)
            if on_fold is not None:
                on_fold()
    return out, chosen


def fold_accuracy(scores: np.ndarray, y: np.ndarray, folds: np.ndarray) -> np.ndarray:
    """[R, F] Eq. 1 accuracy of out-of-fold scores in each held-out fold."""
    right = np.where(scores >= 0, 1, -1) == y[None, :]
    n_f = int(folds.max()) + 1
    return np.array([[right[r, folds[r] == f].mean() for f in range(n_f)] for r in range(folds.shape[0])])
