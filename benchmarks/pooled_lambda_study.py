"""Does pooling the shrunk stack's lambda choice over the backbones of a benchmark help? (#18 screen)

    python benchmarks/pooled_lambda_study.py FIRST N OUT.jsonl

The shrunk stack's lambda is a hyper-parameter of the data's size and the bank's structure, which
the backbones of one benchmark share (the same pairs, split by the same id hash); its per-condition
choice is noisy (benchmarks/results/lampath-study.txt). Here each condition's CV log-loss path
(`fit`'s final 5-fold assignment on its own non-test rows) is summed over the benchmark's backbones and
one lambda is chosen for all of them; each condition's weights are still fitted on its own rows only
(subagged as deployed). Test pairs of any backbone are never read: they are the same pairs in every
backbone's split. A screen: test accuracy of the deployed choice (bshrunk_own, identical to `bag-*`)
and the pooled one (bshrunk_pooled), no nested folds, so `candidate_study.py replay --grid` compares
them deployed everywhere. A study tool: never asserts, never runs in the tests.
"""
import json, os, sys, time
for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(v, "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import robustness as rb
from candidate_variants import acc_of, argmin_larger, cell_arguments, final, row_loss, setup, shrunk_oof, summary_line
from baer_fast.heads.stack import SHRUNK_LAMBDAS, fit_shrunk_weights, mean_direction
from baer_fast.selection.nested import bag_parts


def benchmark_cells(names, i):
    """One JSON-able cell per condition of one benchmark, split i."""
    data = {nm: setup(rb._CONDITIONS[nm], i) for nm in names}
    loss = {nm: row_loss(shrunk_oof(phi, y, final(ids), lambda x, yy, K=K: mean_direction(K, x.shape[1])), y)
            for nm, (ids, phi, y, _, _, K) in data.items()}
    pooled = argmin_larger(sum(l.sum(axis=1) for l in loss.values()), SHRUNK_LAMBDAS, 9)
    for nm, (ids, phi, y, phi_t, y_t, K) in data.items():
        res = {"condition": nm, "split": i, "fold_acc": {}, "test_acc": {}, "info": {}}
        for tag, j in (("own", argmin_larger(loss[nm].mean(axis=1), SHRUNK_LAMBDAS)), ("pooled", pooled)):
            rms, w = fit_shrunk_weights(phi, y, SHRUNK_LAMBDAS[j], K, bag_parts(ids))
            res["test_acc"][f"bshrunk_{tag}"] = acc_of((phi_t / rms) @ w, y_t)
            res["info"][f"bshrunk_{tag}"] = {"lam": SHRUNK_LAMBDAS[j]}
        yield res


def main(argv=None) -> int:
    args = cell_arguments(__doc__, only=False).parse_args(argv)      # pooling needs every backbone: no ONLY
    t0 = time.perf_counter()
    rb._init(str(rb.default_root()), None)
    groups, cells = {}, 0
    for name in rb._CONDITIONS:
        groups.setdefault(name.split("/")[0], []).append(name)
    with open(args.out, "w") as fh:
        for bench, names in groups.items():
            for i in range(args.first, args.first + args.n):
                for res in benchmark_cells(names, i):
                    fh.write(json.dumps(res) + "\n"); fh.flush()
                    cells += 1
            print(f"[{time.perf_counter() - t0:.0f}s] {bench}", file=sys.stderr, flush=True)
    print(summary_line("pooled_lambda_study", args, cells, len(rb._CONDITIONS), t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
