"""Does averaging the shrunk stack over more subsamples help? (#18 screen)

    python benchmarks/bagmore_study.py FIRST N OUT.jsonl [ONLY]

`fit` deploys the mean of the shrunk stack's fits on the 5 four-fifths of one id-hashed cut of the rows
(subagging). Adopting it lowered the weights' sampling noise and won cells; this asks whether more of the
same helps. At the deployed lambda (same rule, same folds), the variants average the fits over
  bshrunk_b20: 4 id-hashed cuts into 5 parts (20 fits on four-fifths; the first cut is the deployed one);
  bshrunk_h20: 10 id-hashed cuts into halves (20 fits on one half each: Buehlmann-Yu half-subagging).
A screen: test accuracy of the deployed head (bshrunk_own) and the variants, no nested folds;
`candidate_study.py replay --grid` compares them deployed everywhere.
A study tool: never asserts, never runs in the tests.
"""
import os, sys
for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(v, "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np
from candidate_variants import deployed_cell, setup, acc_of, cell_arguments, write_cells
from baer_fast.heads.stack import fit_shrunk_weights
from baer_fast.selection.nested import fold_assignments, SALT, BAG_PARTS

VARIANTS = {"bshrunk_b20": (BAG_PARTS, 4), "bshrunk_h20": (2, 10)}   # name -> (parts per cut, cuts)


def cell(c, name, i):
    ids, phi, y, phi_t, y_t, K = setup(c, i)
    res = deployed_cell(name, i, ids, phi, y, phi_t, y_t, K)
    lam = res["info"]["bshrunk_own"]["lam"]
    for tag, (parts, cuts) in VARIANTS.items():
        fits = [fit_shrunk_weights(phi, y, lam, K, p) for p in fold_assignments(ids, parts, cuts, SALT + ":bag")]
        rms, w = fits[0][0], np.mean([f[1] for f in fits], axis=0)     # rms is that of all rows in every fit
        res["test_acc"][tag] = acc_of((phi_t / rms) @ w, y_t)
        res["info"][tag] = {"lam": lam}
    return res


if __name__ == "__main__":
    sys.exit(write_cells(cell_arguments(__doc__).parse_args(), cell, "bagmore_study"))
