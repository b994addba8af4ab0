"""Does the responses' length belong in the stack, not only in the tie-break? (#18 screen)

    python benchmarks/length_study.py FIRST N OUT.jsonl [ONLY]

The deployed head reads length only for exact ties (heads/tiebreak.py), where it beats a coin on
these banks (docs/selection.md, "Ties"). Here it is one more antisymmetric column of phi, so the
fit weighs it against the experts on every pair: `lsign` = sign(len_a - len_b) (the tie-break's
feature) and `llog` = log((1 + len_a) / (1 + len_b)). The column's prior weight is 0 (the mean's
direction covers the zt columns only), so the shrunk stack's ridge pulls it to 0 unless the CV
log-loss pays for it; lambda by `fit`'s rule over its final folds, subagged as deployed. Both the
deployed head (`own_tb`) and the variants get the tie-break, fitted on the same training rows.
`own` is the deployed head without it (as `bag-*`). Test accuracy only, deployed everywhere;
`candidate_study.py replay BASE OUT --grid own_tb,lsign_tb,llog_tb` compares them.
A study tool: never asserts, never runs in the tests.
"""
import os, sys
for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(v, "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np
from candidate_variants import acc_of, cats_of, cond_rows, final, phi_of, cell_arguments, write_cells
from baer_fast.heads.cascade import strength
from baer_fast.heads.stack import cv_shrunk_lambda, fit_shrunk_weights
from baer_fast.heads.tiebreak import fit_tiebreak, length_sign
from baer_fast.selection.nested import bag_parts


def log_ratio(records):
    out = np.zeros(len(records))
    for i, r in enumerate(records):
        a, b = r.meta.get("len_a"), r.meta.get("len_b")
        if isinstance(a, (int, float)) and isinstance(b, (int, float)):
            out[i] = np.log1p(a) - np.log1p(b)
    return out


def shrunk(phi, y, phi_t, ids, K):
    lam, _ = cv_shrunk_lambda(phi, y, final(ids), K)
    rms, w = fit_shrunk_weights(phi, y, lam, K, bag_parts(ids))
    return (phi_t / rms) @ w, lam, w[-1] / rms[-1]


def broken(s, tb, records):
    s = s.copy()
    tie = strength(s) == 0
    d = length_sign(records)
    s[tie] = np.where(d[tie] != 0, tb["weight"] * d[tie], s[tie])
    return s


def cell(c, name, i):
    rows, y, trec, y_t, experts = cond_rows(c, i)
    cats, tcats = cats_of(rows)
    ids, K = [r.id for r in rows], len(experts)
    phi, phi_t = phi_of(rows, experts, cats, tcats), phi_of(trec, experts, cats, tcats)
    tb = fit_tiebreak(rows, y)
    res = {"condition": name, "split": i, "fold_acc": {}, "test_acc": {}, "info": {}}
    s, lam, _ = shrunk(phi, y, phi_t, ids, K)
    res["test_acc"]["own"] = acc_of(s, y_t)
    res["test_acc"]["own_tb"] = acc_of(broken(s, tb, trec), y_t)
    res["info"]["own"] = {"lam": lam, "ties": int(np.sum(strength(s) == 0))}
    for tag, feat in (("lsign", length_sign), ("llog", log_ratio)):
        col, col_t = feat(rows)[:, None], feat(trec)[:, None]
        s, lam, wl = shrunk(np.hstack([phi, col]), y, np.hstack([phi_t, col_t]), ids, K)
        res["test_acc"][f"{tag}_tb"] = acc_of(broken(s, tb, trec), y_t)
        res["info"][f"{tag}_tb"] = {"lam": lam, "w_len": float(wl), "ties": int(np.sum(strength(s) == 0))}
    return res


if __name__ == "__main__":
    sys.exit(write_cells(cell_arguments(__doc__).parse_args(), cell, "length_study"))
