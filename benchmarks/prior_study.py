"""Does a prior from the other backbones of the same benchmark beat the shrunk stack's mean prior? (#18 study)

    python benchmarks/prior_study.py FIRST N OUT.jsonl [ONLY]

The shrunk stack pulls its weights toward c x the equal-weight mean of the experts. Here the
pull is toward the other backbones of the same benchmark instead (empirical Bayes across
conditions): for a target condition t and each other condition o of its benchmark, a member
is o's shrunk stack restricted to the experts t and o share, fitted on o's non-test rows (the
same id-hashed split, so t's test pairs are never read). The prior score p(x) is the sum of
the members' scores on t's pairs, each divided by its RMS over t's training rows (label-free).
Candidates, on the same nested folds as `candidate_variants.py`:

  xshrunk  argmin logloss(y, c p + x.v) + lam/2 |v|^2 (c by the 1-D odd fit of p, lambda by inner
           CV log-loss over SHRUNK_LAMBDAS, subagged over bag_parts like the deployed shrunk stack)
  xprior   c p alone
  xmshrunk the same with the prior c1 p + c2 x.e (e the mean direction): the mean prior is nested in it
  bshrunk  the deployed shrunk stack (mean prior), recomputed here for a paired comparison

Members that saw a pair's label (another backbone's copy of the same pair) would make p
optimistic on exactly that pair, so p is cross-fitted: on a row the model is trained on, the
members are fitted without that row's id-hashed part (bag_parts) and without every held-out id;
on held-out rows, without the held-out ids. Conditions with no other backbone (JudgeBench,
Auto-J) have no prior: xshrunk falls back to bshrunk there. Output feeds
`candidate_study.py replay`. A study tool: never asserts, never runs in the tests.
"""
import json, os, sys, time
for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(v, "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np
import robustness as rb
from candidate_variants import acc_of, cats_of, cell_arguments, cond_rows, inner, phi_of, summary_line
from candidate_variants import final as final_folds
from baer_fast.heads.logistic import newton_logistic
from baer_fast.heads.stack import (MEAN_SCALE_LAMBDA, mean_direction, SHRUNK_LAMBDAS, cv_shrunk_lambda, fit_odd_logistic,
                                   fit_shrunk_weights, training_rms)
from baer_fast.selection.nested import N_FOLDS, N_REPEATS, bag_parts, fold_assignments


class Member:
    """Another backbone's shrunk stack on the shared experts, refittable without given ids."""

    def __init__(self, orows, oy, target_recs, experts):
        cats, tcats = cats_of(orows)
        self.ids = np.array([r.id for r in orows])
        self.phi, self.y, self.k = phi_of(orows, experts, cats, tcats), oy, len(experts)
        self.target = phi_of(target_recs, experts, cats, tcats)          # t's training rows then t's test rows
        self.cache = {}

    def scores(self, exclude: frozenset) -> np.ndarray:
        """Scores on t's rows of the member fitted without the ids in `exclude` (lambda chosen without them too)."""
        if exclude not in self.cache:
            keep = ~np.isin(self.ids, list(exclude)) if exclude else np.ones(len(self.ids), bool)
            lam, _ = cv_shrunk_lambda(self.phi[keep], self.y[keep], inner(list(self.ids[keep])), self.k)
            rms, w = fit_shrunk_weights(self.phi[keep], self.y[keep], lam, self.k)
            self.cache[exclude] = (self.target / rms) @ w
        return self.cache[exclude]


def prior(members, ids_all, tr, held) -> np.ndarray:
    """p over all target rows (training then test), cross-fitted on `tr` (indices into t's training rows)."""
    out = np.zeros(len(ids_all))
    for m in members:
        s = crossfit(m, ids_all, tr, held)
        r = np.sqrt(np.mean(s[tr] ** 2))
        out += s / r if r > 0 else s
    return out


def crossfit(m, ids_all, tr, held) -> np.ndarray:
    """One member's scores on every target row: a row of `tr` scored by the member fitted without its
    id-hashed part and without `held`; every other row by the member fitted without `held`."""
    held_ids = frozenset(ids_all[j] for j in held)
    parts = bag_parts([ids_all[j] for j in tr])
    s = m.scores(held_ids).copy()
    for q in np.unique(parts):
        rows_q = np.asarray(tr)[parts == q]
        s[rows_q] = m.scores(held_ids | frozenset(ids_all[j] for j in rows_q))[rows_q]
    return s


def offset_fit(x, y, p, lam, e=None):
    """-> (offset weights on [p] or [p, x.e], v): the prior's scale(s) by a tiny-ridge odd fit, then the ridge."""
    q = p[:, None] if e is None else np.column_stack([p, x @ e])
    c = fit_odd_logistic(q, y, MEAN_SCALE_LAMBDA)
    v = newton_logistic(x, y, lam, intercept=False, offset=q @ c)
    return c, v


def lam_folds(ids_tr, final):
    """The folds that choose lambda: fit's final 5-fold assignment for the refit, the inner 3-fold one in a fold."""
    return final_folds(ids_tr) if final else inner(ids_tr)


def xshrunk_scores(phi, y, ids_all, members, tr, te, k=None, bag=True, final=False):
    """Held-out scores on te of xshrunk (lambda by inner CV log-loss) and of xprior, fitted on tr.
    k (the number of experts): the prior is c1 p + c2 x.e, e the mean direction (xmshrunk)."""
    tr, te = np.asarray(tr), np.asarray(te)
    e = mean_direction(k, phi.shape[1]) if k else None
    ids_tr = [ids_all[j] for j in tr]
    folds = lam_folds(ids_tr, final)
    lls = np.zeros(len(SHRUNK_LAMBDAS))
    for f in np.unique(folds):
        itr, ite = tr[folds != f], tr[folds == f]
        p = prior(members, ids_all, itr, np.concatenate([ite, te]))
        rms = training_rms(phi[itr])
        for j, lam in enumerate(SHRUNK_LAMBDAS):
            c, v = offset_fit(phi[itr] / rms, y[itr], p[itr], lam, e)
            s = _score(c, v, p[ite], phi[ite] / rms, e)
            lls[j] += np.sum(np.logaddexp(0, -y[ite] * s))
    j = min(range(len(SHRUNK_LAMBDAS)), key=lambda j: (round(lls[j] / len(tr), 12), -SHRUNK_LAMBDAS[j]))
    lam = SHRUNK_LAMBDAS[j]
    p = prior(members, ids_all, tr, te)
    rms = training_rms(phi[tr])
    x = phi[tr] / rms
    parts = bag_parts(ids_tr) if bag else np.zeros(len(tr), int)
    fits = [offset_fit(x[parts != q], y[tr][parts != q], p[tr][parts != q], lam, e) for q in np.unique(parts)] \
        if len(np.unique(parts)) > 1 else [offset_fit(x, y[tr], p[tr], lam, e)]
    c = np.mean([f[0] for f in fits], axis=0)
    v = np.mean([f[1] for f in fits], axis=0)
    cp = fit_odd_logistic(p[tr][:, None], y[tr], MEAN_SCALE_LAMBDA)[0]
    return _score(c, v, p[te], phi[te] / rms, e), cp * p[te], lam


def _score(c, v, p, x, e):
    q = p[:, None] if e is None else np.column_stack([p, x @ e])
    return q @ c + x @ v


def bshrunk_scores(phi, y, ids_all, tr, te, k, final=False):
    ids_tr = [ids_all[j] for j in tr]
    lam, _ = cv_shrunk_lambda(phi[tr], y[tr], lam_folds(ids_tr, final), k)
    rms, w = fit_shrunk_weights(phi[tr], y[tr], lam, k, bag_parts(ids_tr))
    return (phi[te] / rms) @ w


def cell(name, i, conds):
    bench = name.split("/")[0]
    rows, y, trec, yt, experts = cond_rows(conds[name], i)
    cats, tcats = cats_of(rows)
    recs = rows + trec
    phi = phi_of(recs, experts, cats, tcats)
    yall = np.concatenate([y, yt])
    ids_all = [r.id for r in rows] + [f"\0test:{r.id}" for r in trec]   # test ids: excluded by their real id below
    n, k = len(rows), len(experts)
    members = []
    for o, oc in conds.items():
        if o == name or o.split("/")[0] != bench:
            continue
        orows, oy, _, _, oexp = cond_rows(oc, i)
        shared = sorted(set(oexp) & set(experts))
        if shared:
            members.append(Member(orows, oy, recs, shared))
    # a test pair's own id must be excluded from every member (its other-backbone copy is a test row there too,
    # so training_rows already dropped it; assert rather than assume)
    test_ids = {r.id for r in trec}
    for m in members:
        assert not test_ids & set(m.ids), "a member holds a test pair"
    folds = fold_assignments([r.id for r in rows], N_FOLDS, N_REPEATS)
    res = {"condition": name, "split": i, "fold_acc": {"xshrunk": [], "xprior": [], "xmshrunk": [], "bshrunk_x": []},
           "test_acc": {}, "info": {"members": len(members)}}
    for r in range(folds.shape[0]):
        rows_acc = {key: [] for key in res["fold_acc"]}
        for fo in range(N_FOLDS):
            tr, te = np.flatnonzero(folds[r] != fo), np.flatnonzero(folds[r] == fo)
            b = bshrunk_scores(phi, yall, ids_all, tr, te, k)
            if members:
                s, sp, _ = xshrunk_scores(phi, yall, ids_all, members, tr, te)
                sm, _, _ = xshrunk_scores(phi, yall, ids_all, members, tr, te, k)
            else:
                s, sp, sm = b, b, b
            rows_acc["xshrunk"].append(acc_of(s, yall[te]))
            rows_acc["xmshrunk"].append(acc_of(sm, yall[te]))
            rows_acc["xprior"].append(acc_of(sp, yall[te]))
            rows_acc["bshrunk_x"].append(acc_of(b, yall[te]))
        for key in rows_acc:
            res["fold_acc"][key].append(rows_acc[key])
    tr, te = np.arange(n), np.arange(n, len(recs))
    b = bshrunk_scores(phi, yall, ids_all, tr, te, k, final=True)
    if members:
        s, sp, lam = xshrunk_scores(phi, yall, ids_all, members, tr, te, final=True)
        sm, _, lam_m = xshrunk_scores(phi, yall, ids_all, members, tr, te, k, final=True)
        res["info"].update(lam=lam, lam_m=lam_m)
    else:
        s, sp, sm = b, b, b
    res["test_acc"] = {"xshrunk": acc_of(s, yt), "xprior": acc_of(sp, yt), "xmshrunk": acc_of(sm, yt),
                       "bshrunk_x": acc_of(b, yt)}
    return res


def main(argv=None) -> int:
    args = cell_arguments(__doc__).parse_args(argv)
    t0 = time.perf_counter()
    root = rb.default_root()
    rb._init(str(root), None)              # every condition: the other backbones are the prior's members
    conds = rb._CONDITIONS
    targets = [name for name in conds if rb.wanted(args.only, name)]
    if not targets:
        raise rb.no_cells(root, [rel for _, _, rel in rb.SOURCES], args.only)
    with open(args.out, "w") as fh:
        for name in targets:
            for i in range(args.first, args.first + args.n):
                fh.write(json.dumps(cell(name, i, conds)) + "\n"); fh.flush()
            print(f"[{time.perf_counter()-t0:.0f}s] {name}", file=sys.stderr, flush=True)
    print(summary_line("prior_study", args, len(targets) * args.n, len(targets), t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
