"""Does choosing the shrunk stack's lambda for the subagged estimator it deploys help? (#18 screen)

    python benchmarks/bagcv_study.py FIRST N OUT.jsonl [ONLY]

`fit` chooses lambda by the CV log-loss of the plain shrunk stack, then deploys the mean of its fits on
the 5 four-fifths of the rows (subagging), which is a different estimator: each part's fit sees fewer
rows, and averaging lowers the weights' variance, so the lambda that suits one need not suit the other.
Here each training fold's out-of-fold scores come from the subagged fit itself (bag parts of that fold's
ids, as `fit` would draw them), at every lambda of the grid, and lambda is chosen by that CV log-loss
(ties to the larger). A screen: test accuracy of the deployed head (bshrunk_own) and this one
(bshrunk_bagcv), no nested folds; `candidate_study.py replay --grid` compares them deployed everywhere.
A study tool: never asserts, never runs in the tests.
"""
import os, sys
for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(v, "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np
from candidate_variants import screen_cell, cell_arguments, write_cells
from baer_fast.heads.stack import SHRUNK_LAMBDAS, fit_shrunk_weights
from baer_fast.selection.nested import bag_parts


def bagged_path(phi_tr, y_tr, phi_te, K, lambdas, ids_tr):
    """[len(lambdas), N_te] held-out scores of the subagged shrunk stack fitted on these rows."""
    out = []
    for lam in lambdas:
        rms, w = fit_shrunk_weights(phi_tr, y_tr, lam, K, bag_parts(ids_tr))
        out.append((phi_te / rms) @ w)
    return np.stack(out)


if __name__ == "__main__":
    def cell(c, name, i):
        return screen_cell(c, name, i, "bshrunk_bagcv", SHRUNK_LAMBDAS, bagged_path, fit_shrunk_weights)

    sys.exit(write_cells(cell_arguments(__doc__).parse_args(), cell, "bagcv_study"))
