"""Prototype candidate heads on the robustness cells, through the same nested folds as `fit`.

    python benchmarks/candidate_variants.py FIRST N OUT.jsonl [ONLY] [--set plain|acc|dec|lda|bag|rcv|1se|tcv|lampath|pbma|free]

For each (condition, split i) with FIRST <= i < FIRST + N: the non-test rows exactly as
`fit_condition` prepares them (id order, same experts, same phi), the same outer folds
(`fold_assignments(ids, 5, 2)`), inner folds and final folds; per prototype the [2, 5]
out-of-fold fold accuracies and the test accuracy of the refit on all non-test rows. Every
prototype is a fixed or fitted weight vector on phi / rms (odd, so antisymmetric by
construction); labels are read from training rows only. Sets: plain (vote_a1, vote_a3,
vote_noclip: reliability-weighted votes; trim: top-m by training accuracy, m by inner CV;
trim_half; vote_hard: the vote on signs; svote: the shrunk stack pulled toward the vote);
acc (svote_acc, smean_acc: pulled toward the vote / the mean, lambda incl. 1e6 by inner CV
accuracy, ties to the larger); dec (vote_dec, svote_dec: accuracy among decided rows only);
lda (lda_diag, lda_lw, slda_lw: Fisher directions, diagonal or Ledoit-Wolf covariance);
bag (shrunk_proto: the shrunk stack re-implemented here; bshrunk: the same lambda, subagged as `fit`
deploys it, heads.stack.fit_shrunk_weights over selection.nested.bag_parts); rcv (rbshrunk: bshrunk with
lambda chosen by CV log-loss averaged over CV_REPEATS fold assignments instead of one, inner and final);
1se (bshrunk_1se: bshrunk with lambda by the one-standard-error rule, the largest lambda within one SE of
the minimum CV log-loss); tcv (bshrunk_tcv: bshrunk with lambda by scale-free CV log-loss, each lambda's
out-of-fold scores given their own fitted temperature first); lampath (bshrunk_l<lambda>: bshrunk at each
fixed lambda of the grid, test accuracy only, no folds: the best of them on test is a ceiling for any
lambda rule); pbma (bshrunk_pbma: no lambda chosen, the bagged fits at every lambda averaged with pseudo-BMA
weights, exp of each lambda's out-of-fold log-likelihood); free (bfree: bshrunk with the mean's scale c fitted
jointly with the deviation, ridge MEAN_SCALE_LAMBDA on c, instead of fixed first as an offset).
`vote_a1` is the library's `vote` head (same numbers). Output feeds
`candidate_study.py replay`. A study tool: never asserts, never runs in the tests.
"""
import argparse, json, os, sys, time
for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(v, "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np
from scipy.optimize import minimize
import robustness as rb
from baer_fast.features.evidence import EPS, evidence, runs_tensor, stack_features
from baer_fast.heads.logistic import newton_logistic
from baer_fast.heads.stack import (training_rms, fit_odd_logistic, fit_shrunk_weights, mean_direction, SHRUNK_LAMBDAS,
                                   MEAN_SCALE_LAMBDA, cv_shrunk_lambda, oof_path_scores)
from baer_fast.io.splits import SplitSpec, roles
from baer_fast.selection.fit import training_rows, resolve_expert
from baer_fast.selection.nested import bag_parts, fold_assignments, SALT, N_FOLDS, N_REPEATS, INNER_FOLDS

def cond_rows(c, i):
    """Split i of condition c as `fit_condition` prepares it: non-test rows in id order, their labels, the
    labelled test records and labels, and the stack's experts (reference / pointwise set aside)."""
    spec = SplitSpec(seed=f"robust-{i}")
    rows, _ = training_rows(c["signals"], spec)
    rows = sorted(rows, key=lambda r: r.id)
    present = {k for r in rows for k in r.experts}
    ref = resolve_expert(None, "reference", present, "reference")
    pnt = resolve_expert(None, "pointwise", present, "pointwise")
    experts = sorted(present - {ref, pnt})
    y = np.array([1.0 if r.label == "a" else -1.0 for r in rows])
    test = (np.asarray(roles(c["signals"], spec)) == "test") & (c["y"] != 0)
    trec = [r for r, k in zip(c["signals"], test) if k]
    return rows, y, trec, c["y"][test], experts

def cats_of(rows):
    """(subsets, task categories) seen in these rows: the stack's interaction blocks."""
    return sorted({r.subset for r in rows}), sorted({r.category for r in rows if getattr(r, "category", None)})

def phi_of(recs, experts, cats, tcats):
    _, _, z, zt = evidence(runs_tensor(recs, experts), EPS)
    return stack_features(z, zt, [r.subset for r in recs], cats, [getattr(r, "category", None) for r in recs], tcats)

def setup(c, i):
    rows, y, trec, yt, experts = cond_rows(c, i)
    cats, tcats = cats_of(rows)
    return [r.id for r in rows], phi_of(rows, experts, cats, tcats), y, phi_of(trec, experts, cats, tcats), yt, len(experts)

# ---- candidate weight fitters: (x_tr = phi_tr/rms, y_tr, K, ids_tr) -> w
def accs(x, y, K, a):
    zt = x[:, 1:2 * K:2]
    right = (np.where(zt >= 0, 1, -1) == y[:, None]).sum(axis=0)
    return (right + a) / (len(y) + 2 * a)

def accs_dec(x, y, K, a):
    zt = x[:, 1:2 * K:2]
    dec = zt != 0
    right = ((np.sign(zt) == y[:, None]) & dec).sum(axis=0)
    return (right + a) / (dec.sum(axis=0) + 2 * a)

def vote_dir(x, y, K, a=1.0, clip=True, dec=False):
    p = (accs_dec if dec else accs)(x, y, K, a)
    w = np.log(p) - np.log1p(-p)
    if clip:
        w = np.maximum(w, 0.0)
    d = np.zeros(x.shape[1])
    if not np.any(w > 0):
        return mean_direction(K, x.shape[1])
    d[1:2 * K:2] = w / w.sum()
    return d

def trim_dir(x, y, K, m, a=1.0):
    p = accs(x, y, K, a)
    top = sorted(range(K), key=lambda k: (-p[k], k))[:m]
    d = np.zeros(x.shape[1]); d[[1 + 2 * k for k in top]] = 1.0 / m
    return d

def inner(ids, n=INNER_FOLDS, repeats=1):
    """The inner folds that choose a hyper-parameter inside a training fold: [N], or [repeats, N] when repeats > 1."""
    a = fold_assignments(ids, n, repeats, SALT + ":inner")
    return a[0] if repeats == 1 else a

def final(ids, repeats=1):
    """`fit`'s final-refit folds ([N], or [repeats, N] when repeats > 1)."""
    a = fold_assignments(ids, N_FOLDS, repeats, SALT + ":final")
    return a[0] if repeats == 1 else a

def acc_of(s, y):
    return float(np.mean(np.where(s >= 0, 1, -1) == y))

def cv_trim_m(phi, y, ids, K, folds, a=1.0):
    ms = list(range(1, K + 1))
    s = np.zeros((K, len(y)))
    for f in np.unique(folds):
        tr, te = folds != f, folds == f
        rms = training_rms(phi[tr]); x = phi[tr] / rms
        for j, m in enumerate(ms):
            s[j, te] = (phi[te] / rms) @ trim_dir(x, y[tr], K, m, a)
    acc = [acc_of(s[j], y) for j in range(K)]
    best = max(range(K), key=lambda j: (acc[j], ms[j]))   # ties to larger m
    return ms[best]

def prior_fit(x, y, d):
    c = fit_odd_logistic((x @ d)[:, None], y, MEAN_SCALE_LAMBDA)[0]
    return c * d, x @ (c * d)

def subagged(x, y, parts, fit):
    """The mean of fit(x_keep, y_keep) over the rows outside each part, as heads.stack.fit_shrunk_weights subags;
    parts None or a single part: the plain fit."""
    names = np.unique(parts) if parts is not None else ()
    if len(names) < 2:
        return fit(x, y)
    return np.mean([fit(x[parts != q], y[parts != q]) for q in names], axis=0)

def bounded_minimize(fg, x0, bounds):
    """L-BFGS-B on fg(x) -> (value, gradient), tolerances tight enough for the screens' convex fits."""
    return minimize(fg, x0, jac=True, method="L-BFGS-B", bounds=bounds,
                    options={"ftol": 1e-15, "gtol": 1e-10, "maxiter": 5000, "maxcor": 30}).x

def shrunk_path(phi_tr, y_tr, phi_te, dirf, lambdas=SHRUNK_LAMBDAS):
    rms = training_rms(phi_tr); x = phi_tr / rms
    prior, off = prior_fit(x, y_tr, dirf(x, y_tr))
    out, v = np.zeros((len(lambdas), len(phi_te))), None
    ws = []
    for j in range(len(lambdas)):  # lambdas sorted descending already
        v = newton_logistic(x, y_tr, lambdas[j], intercept=False, w0=v, offset=off)
        out[j] = (phi_te / rms) @ (prior + v)
        ws.append(prior + v)
    return out, ws

def shrunk_oof(phi, y, folds, dirf, lambdas=SHRUNK_LAMBDAS):
    """[L, N] out-of-fold scores of the shrunk path toward dirf's direction (heads.stack.oof_path_scores)."""
    return oof_path_scores(phi, y, folds, lambdas, lambda a, b, c, lams: shrunk_path(a, b, c, dirf, lams)[0])

def row_loss(s, y):
    """[L, N] per-row log-loss of scores s [L, N]."""
    return np.logaddexp(0, -y[None, :] * s)

def argmin_larger(ll, lambdas, digits=12):
    """Index of the smallest value (rounded), ties to the larger lambda."""
    return min(range(len(lambdas)), key=lambda j: (round(float(ll[j]), digits), -lambdas[j]))

def cv_shrunk_acc(phi, y, folds, dirf, lambdas):
    s = shrunk_oof(phi, y, folds, dirf, lambdas)
    acc = [acc_of(s[j], y) for j in range(len(lambdas))]
    return min(range(len(lambdas)), key=lambda j: (-acc[j], -lambdas[j]))

BIG = (1e6, 100.0, 10.0, 1.0, 0.1, 0.01, 0.001)

def cv_shrunk(phi, y, folds, dirf, lambdas=SHRUNK_LAMBDAS):
    """lambda index by CV log-loss over folds ([N], or [R, N]: averaged over the R assignments); ties to the larger."""
    folds_r = np.atleast_2d(folds)
    ll = sum(row_loss(shrunk_oof(phi, y, a, dirf, lambdas), y).mean(axis=1) for a in folds_r) / len(folds_r)
    return argmin_larger(ll, lambdas)

def cv_shrunk_1se(phi, y, folds, dirf, lambdas=SHRUNK_LAMBDAS):
    """lambda index by the one-standard-error rule on the CV log-loss path: the largest lambda whose
    CV log-loss is within one SE (sd of the per-row losses / sqrt N, at the minimum) of the minimum."""
    loss = row_loss(shrunk_oof(phi, y, folds, dirf, lambdas), y)
    ll = loss.mean(axis=1)
    best = argmin_larger(ll, lambdas)
    se = loss[best].std(ddof=1) / np.sqrt(len(y))
    ok = [j for j in range(len(lambdas)) if ll[j] <= ll[best] + se]
    return max(ok, key=lambda j: lambdas[j])

def cv_shrunk_tcv(phi, y, folds, dirf, lambdas=SHRUNK_LAMBDAS):
    """lambda index by scale-free CV log-loss: each lambda's out-of-fold scores get their own temperature
    (a 1-D odd logistic fit, ridge MEAN_SCALE_LAMBDA) before the log-loss, so the choice rewards the
    direction of the weights, not their size; ties (to 12 decimals) to the larger lambda."""
    s = shrunk_oof(phi, y, folds, dirf, lambdas)
    ll = [float(np.mean(np.logaddexp(0, -y * fit_odd_logistic(s[j][:, None], y, MEAN_SCALE_LAMBDA)[0] * s[j])))
          for j in range(len(lambdas))]
    return argmin_larger(ll, lambdas)

def cv_shrunk_pbma(phi, y, folds, dirf, lambdas=SHRUNK_LAMBDAS):
    """Pseudo-BMA weights over the lambda grid: w_j proportional to exp(-sum_i loss_ij), the out-of-fold
    log-likelihood of lambda j (Yao et al. 2018), instead of one chosen lambda."""
    tot = row_loss(shrunk_oof(phi, y, folds, dirf, lambdas), y).sum(axis=1)
    w = np.exp(-(tot - tot.min()))
    return w / w.sum()

def free_fit(x, y, lam, e, w0=None):
    """argmin mean_i log(1 + exp(-y_i (c e + v).x_i)) + lam/2 |v|^2 + MEAN_SCALE_LAMBDA/2 c^2, jointly in (c, v):
    the mean's scale is fitted with the deviation instead of fixed first. The mean score gets its own column,
    scaled so that lam's penalty on its coefficient is MEAN_SCALE_LAMBDA's on c. -> (weights on x, [v, c'])."""
    S = np.sqrt(lam / MEAN_SCALE_LAMBDA)
    xa = np.concatenate([x, (x @ e)[:, None] * S], axis=1)
    u = newton_logistic(xa, y, lam, intercept=False, w0=w0)
    return u[:-1] + u[-1] * S * e, u

def free_path(phi_tr, y_tr, phi_te, K, lambdas=SHRUNK_LAMBDAS):
    rms = training_rms(phi_tr); x = phi_tr / rms
    e = mean_direction(K, x.shape[1])
    return np.stack([(phi_te / rms) @ free_fit(x, y_tr, lam, e)[0] for lam in lambdas])

def cv_free(phi, y, folds, K, lambdas=SHRUNK_LAMBDAS):
    s = oof_path_scores(phi, y, folds, lambdas, lambda a, b, c, lams: free_path(a, b, c, K, lams))
    return argmin_larger(row_loss(s, y).mean(axis=1), lambdas)

def lda_dir(x, y, K, mode):
    xz = x[:, 1:2 * K:2]
    u = y[:, None] * xz
    mu = u.mean(axis=0)
    sd = u.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    if mode == "diag":
        w = mu / sd ** 2
    else:
        from sklearn.covariance import ledoit_wolf
        cov, _ = ledoit_wolf(u / sd, assume_centered=False)
        w = np.linalg.solve(cov, mu / sd) / sd
    d = np.zeros(x.shape[1]); d[1:2 * K:2] = w
    return d

ONE_VARIANT = {"rcv": ("rbshrunk", "bag"),          # cell passes CV_REPEATS fold assignments
               "1se": ("bshrunk_1se", "bag1se"), "tcv": ("bshrunk_tcv", "bagtcv"),
               "pbma": ("bshrunk_pbma", "bagpbma"), "free": ("bfree", "bagfree")}

def make_variants(K):
    V = {}
    mean_dir = lambda x, y: mean_direction(K, x.shape[1])
    if SET in ONE_VARIANT:     # one prototype of the subagged shrunk stack (mean prior) per set
        name, kind = ONE_VARIANT[SET]
        return {name: (kind, mean_dir)}
    if SET == "lampath":   # test accuracy only, one variant per fixed lambda: a ceiling for any lambda rule
        return {f"bshrunk_l{lam:g}": ("bagfixed", (lam, mean_dir)) for lam in SHRUNK_LAMBDAS}
    if SET == "bag":
        V["shrunk_proto"] = ("shrunk", mean_dir)
        V["bshrunk"] = ("bag", mean_dir)
        return V
    if SET == "lda":
        V["lda_diag"] = ("dir", lambda x, y: lda_dir(x, y, K, "diag"))
        V["lda_lw"] = ("dir", lambda x, y: lda_dir(x, y, K, "lw"))
        V["slda_lw"] = ("shrunk", lambda x, y: lda_dir(x, y, K, "lw") / max(np.abs(lda_dir(x, y, K, "lw")).sum(), 1e-12))
        return V
    if SET == "acc":
        V["svote_acc"] = ("shrunk_acc", lambda x, y: vote_dir(x, y, K, 1.0))
        V["smean_acc"] = ("shrunk_acc", lambda x, y: mean_direction(K, x.shape[1]))
        return V
    if SET == "dec":
        V["vote_dec"] = ("dir", lambda x, y: vote_dir(x, y, K, 1.0, dec=True))
        V["svote_dec"] = ("shrunk", lambda x, y: vote_dir(x, y, K, 1.0, dec=True))
        return V
    for a in (1.0, 3.0):
        V[f"vote_a{a:g}"] = ("dir", lambda x, y, a=a: vote_dir(x, y, K, a))
    V["vote_noclip"] = ("dir", lambda x, y: vote_dir(x, y, K, 1.0, clip=False))
    V["trim"] = ("trim", None)
    V["trim_half"] = ("dir", lambda x, y: trim_dir(x, y, K, (K + 1) // 2))
    V["vote_hard"] = ("hard", None)
    V["svote"] = ("shrunk", lambda x, y: vote_dir(x, y, K, 1.0))
    return V

BAG_LAMBDA = {"bag": cv_shrunk, "bag1se": cv_shrunk_1se, "bagtcv": cv_shrunk_tcv}   # kind -> its lambda rule

def scores(kind, f, phi_tr, y_tr, ids_tr, phi_te, K, cvfolds):
    rms = training_rms(phi_tr); x = phi_tr / rms
    if kind == "dir":
        return (phi_te / rms) @ f(x, y_tr), {}
    if kind == "hard":
        d = vote_dir(x, y_tr, K, 1.0)[1:2 * K:2]
        return np.sign((phi_te / rms)[:, 1:2 * K:2]) @ d, {}
    if kind == "trim":
        m = cv_trim_m(phi_tr, y_tr, ids_tr, K, cvfolds)
        return (phi_te / rms) @ trim_dir(x, y_tr, K, m), {"m": m}
    if kind == "shrunk_acc":
        j = cv_shrunk_acc(phi_tr, y_tr, cvfolds, f, BIG)
        out, _ = shrunk_path(phi_tr, y_tr, phi_te, f, BIG)
        return out[j], {"lam": BIG[j]}
    if kind in BAG_LAMBDA or kind == "bagfixed":   # the subagged shrunk stack as fit deploys it, at one lambda
        lam = f[0] if kind == "bagfixed" else SHRUNK_LAMBDAS[BAG_LAMBDA[kind](phi_tr, y_tr, cvfolds, f)]
        bag_rms, w = fit_shrunk_weights(phi_tr, y_tr, lam, K, bag_parts(ids_tr))
        return (phi_te / bag_rms) @ w, {"lam": lam}
    if kind == "bagfree":
        j = cv_free(phi_tr, y_tr, cvfolds, K)
        e = mean_direction(K, x.shape[1])
        w = subagged(x, y_tr, bag_parts(ids_tr), lambda xk, yk: free_fit(xk, yk, SHRUNK_LAMBDAS[j], e)[0])
        return (phi_te / rms) @ w, {"lam": SHRUNK_LAMBDAS[j]}
    if kind == "bagpbma":
        a = cv_shrunk_pbma(phi_tr, y_tr, cvfolds, f)
        out = 0.0
        for lam, aj in zip(SHRUNK_LAMBDAS, a):
            if aj > 1e-6:   # a lambda with under 1e-6 of the weight changes no score that matters; skip its fit
                bag_rms, w = fit_shrunk_weights(phi_tr, y_tr, lam, K, bag_parts(ids_tr))
                out = out + aj * ((phi_te / bag_rms) @ w)
        return out, {"lam_weights": [round(float(v), 4) for v in a]}
    if kind == "shrunk":
        j = cv_shrunk(phi_tr, y_tr, cvfolds, f)
        out, _ = shrunk_path(phi_tr, y_tr, phi_te, f)
        return out[j], {"lam": SHRUNK_LAMBDAS[j]}

def cell(c, name, i):
    ids, phi, y, phi_t, y_t, K = setup(c, i)
    folds = fold_assignments(ids, N_FOLDS, N_REPEATS)
    reps = CV_REPEATS if SET == "rcv" else 1
    ffold = final(ids, reps)
    res = {"condition": name, "split": i, "fold_acc": {}, "test_acc": {}, "info": {}}
    for vname, (kind, f) in make_variants(K).items():
        fa = []
        for r in range(folds.shape[0] if kind != "bagfixed" else 0):
            row = []
            for fo in range(N_FOLDS):
                tr, te = np.flatnonzero(folds[r] != fo), np.flatnonzero(folds[r] == fo)
                ids_tr = [ids[t] for t in tr]
                s, _ = scores(kind, f, phi[tr], y[tr], ids_tr, phi[te], K, inner(ids_tr, repeats=reps))
                row.append(acc_of(s, y[te]))
            fa.append(row)
        s, info = scores(kind, f, phi, y, ids, phi_t, K, ffold)
        res["fold_acc"][vname] = fa
        res["test_acc"][vname] = acc_of(s, y_t)
        res["info"][vname] = info
    return res

def deployed_cell(name, i, ids, phi, y, phi_t, y_t, K):
    """A cell holding the deployed head's test accuracy and lambda as `bshrunk_own` (identical to `bag-*`'s
    bshrunk): `fit`'s lambda rule (heads.stack.cv_shrunk_lambda) over its final folds, the subagged fit on all
    non-test rows."""
    lam, _ = cv_shrunk_lambda(phi, y, final(ids), K)
    rms, w = fit_shrunk_weights(phi, y, lam, K, bag_parts(ids))
    return {"condition": name, "split": i, "fold_acc": {}, "test_acc": {"bshrunk_own": acc_of((phi_t / rms) @ w, y_t)},
            "info": {"bshrunk_own": {"lam": lam}}}

def screen_cell(c, name, i, tag, grid, path, weights, key="lam"):
    """A screen's cell: the deployed head (`deployed_cell`) and, as `tag`, a variant whose hyper-parameter is
    chosen from `grid` by CV log-loss over `fit`'s final folds (ties to the earlier, stronger entry) with
    path(phi_tr, y_tr, phi_te, K, grid, ids_tr) -> [len(grid), N_te], then fitted by weights(phi, y, g, K, parts)
    -> (rms, w) on all non-test rows, subagged over `bag_parts`."""
    ids, phi, y, phi_t, y_t, K = setup(c, i)
    res = deployed_cell(name, i, ids, phi, y, phi_t, y_t, K)
    s = oof_path_scores(np.arange(len(y)), y, final(ids), grid,      # row indices: the path also gets the fold's ids
                        lambda r_tr, y_tr, r_te, g: path(phi[r_tr], y_tr, phi[r_te], K, g, [ids[t] for t in r_tr]))
    j = argmin_larger(row_loss(s, y).mean(axis=1), grid)
    rms, w = weights(phi, y, grid[j], K, bag_parts(ids))
    res["test_acc"][tag] = acc_of((phi_t / rms) @ w, y_t)
    res["info"][tag] = {key: grid[j]}
    return res

def cell_arguments(doc: str, *, only: bool = True) -> argparse.ArgumentParser:
    """FIRST N OUT.jsonl [ONLY]: the arguments every cell-writing study takes (this file, *_study.py)."""
    ap = argparse.ArgumentParser(description=doc.strip().splitlines()[0],
                                 epilog="Cells to OUT.jsonl, progress to stderr, one JSON summary line to stdout.")
    ap.add_argument("first", type=int, metavar="FIRST", help="index of the first split")
    ap.add_argument("n", type=int, metavar="N", help="splits per condition: FIRST .. FIRST + N - 1")
    ap.add_argument("out", metavar="OUT.jsonl", help="one JSON line per (condition, split) cell")
    if only:
        ap.add_argument("only", nargs="?", metavar="ONLY",
                        help="only the conditions whose name contains ONLY (case-insensitive: Natural, natural/)")
    return ap

def summary_line(study: str, args, cells: int, conditions: int, t0: float) -> str:
    """The one JSON line a cell-writing study ends with on stdout."""
    return json.dumps({"study": study, "out": args.out, "first": args.first, "splits": args.n,
                       "only": getattr(args, "only", None), "conditions": conditions, "cells": cells,
                       "wall_s": round(time.perf_counter() - t0, 1)})

def write_cells(args, cell_of, study: str) -> int:
    """One JSON line per (condition, split) from cell_of(c, name, i) to args.out, progress on stderr,
    then one JSON summary line on stdout."""
    t0 = time.perf_counter()
    rb._init(str(rb.default_root()), args.only)
    cells = 0
    with open(args.out, "w") as fh:
        for name, c in rb._CONDITIONS.items():
            for i in range(args.first, args.first + args.n):
                fh.write(json.dumps(cell_of(c, name, i)) + "\n"); fh.flush()
                cells += 1
            print(f"[{time.perf_counter() - t0:.0f}s] {name}", file=sys.stderr, flush=True)
    print(summary_line(study, args, cells, len(rb._CONDITIONS), t0))
    return 0

SET = "plain"
SETS = ("plain", "acc", "dec", "lda", "bag", *ONE_VARIANT, "lampath")
CV_REPEATS = 5      # rcv: fold assignments whose CV log-loss is averaged to choose the shrunk stack's lambda

if __name__ == "__main__":
    ap = cell_arguments(__doc__)
    ap.add_argument("--set", default="plain", choices=SETS, help="the prototypes to run (default plain)")
    args = ap.parse_args()
    SET = args.set
    sys.exit(write_cells(args, cell, f"candidate_variants --set {SET}"))
