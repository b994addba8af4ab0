"""How far can any head of the stack family get if it is fitted on the test rows too? (#18 ceiling)

    python benchmarks/insample_ceiling.py FIRST N OUT.jsonl [ONLY]

On each robustness cell the subagged shrunk stack is fitted on ALL labelled rows of the condition,
the test rows included, at every lambda of its grid (`insample_l<lambda>`), and scored on the test
rows; `insample_tb_l<lambda>` adds the length tie-break of exact ties as `fit` deploys it
(`heads.tiebreak`), fitted on the same rows; `mean_z` is the label-free mean of the RMS-scaled zt
(no fit). This is not a rule: it reads
the test labels. It bounds what the head family (odd, linear in the stack map) can do on these
cells when the data leave nothing to learn out of sample: with `candidate_study.py replay --grid
... --paired`, the best lambda per cell on test is the ceiling. Where that ceiling still loses a
cell to the protocol best on test, no fit on the dev rows of this family can win it; what remains
is the baseline's optimism (the best of K protocols read on the same test rows).
A study tool: never asserts, never runs in the tests.
"""
import os, sys
for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(v, "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np
from candidate_variants import acc_of, cats_of, cond_rows, phi_of, cell_arguments, write_cells
from baer_fast.heads.cascade import strength
from baer_fast.heads.stack import SHRUNK_LAMBDAS, fit_shrunk_weights, mean_weights
from baer_fast.heads.tiebreak import fit_tiebreak, length_sign
from baer_fast.selection.nested import bag_parts


def cell(c, name, i):
    rows, y, trec, y_t, experts = cond_rows(c, i)
    cats, tcats = cats_of(rows)
    phi_t = phi_of(trec, experts, cats, tcats)
    phi = np.vstack([phi_of(rows, experts, cats, tcats), phi_t])
    y_all = np.concatenate([y, y_t])
    order = np.argsort([r.id for r in rows] + [r.id for r in trec], kind="stable")   # id order, as fit sorts
    ids = sorted([r.id for r in rows] + [r.id for r in trec])
    phi, y_all = phi[order], y_all[order]
    K = len(experts)
    tb = fit_tiebreak(rows + trec, np.concatenate([y, y_t]))["weight"]
    d_t = length_sign(trec)
    res = {"condition": name, "split": i, "fold_acc": {}, "test_acc": {}, "info": {}}
    rms, e = mean_weights(phi, K)
    res["test_acc"]["mean_z"] = acc_of((phi_t / rms) @ e, y_t)
    for lam in SHRUNK_LAMBDAS:
        rms, w = fit_shrunk_weights(phi, y_all, lam, K, bag_parts(ids))
        s = (phi_t / rms) @ w
        res["test_acc"][f"insample_l{lam:g}"] = acc_of(s, y_t)
        res["test_acc"][f"insample_tb_l{lam:g}"] = acc_of(np.where((tb != 0) & (strength(s) == 0) & (d_t != 0), tb * d_t, s), y_t)
    return res


if __name__ == "__main__":
    sys.exit(write_cells(cell_arguments(__doc__).parse_args(), cell, "insample_ceiling"))
