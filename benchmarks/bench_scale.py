"""`frontier`'s budget search, `eval`'s figures and `fit` at scale: the first implementation against the current one.

    python benchmarks/bench_scale.py [--pairs 5000] [--what frontier|eval|fit|both|all]

Synthetic signals (benchmarks/scale_signals.py, seeded) are written to a temporary file; each path runs in
its own subprocess (its peak RSS is its own). frontier: `plan_with_nested` with BLAS threads left as they
are and the Hessian product formed over the transposed view (naive) against `plan_budget` (new). eval:
signals read whole into a plain list, runs gathered by a loop per run (naive) against the meta eval reads
kept and each runs tensor built once (new); both run `evaluate` and `figures`. fit: `fit --jobs 1` (naive)
against `--jobs` = every core (the route candidate's forests on threads). Each pair of runs must give the
same JSON, or the same artifact bytes (checked). "both" is frontier and eval; "all" adds fit. The table
goes to stderr and ONE JSON line to stdout.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _loop_runs(records, experts):
    """features.evidence._runs as first written: a Python loop over every run."""
    import numpy as np
    m = max((len(r.experts.get(k, ())) for r in records for k in experts), default=1)
    u = np.full((len(records), len(experts), max(m, 1)), np.nan)
    counts = np.zeros((len(records), len(experts)), np.int64)
    for i, rec in enumerate(records):
        for k, name in enumerate(experts):
            runs = rec.experts.get(name, ())
            counts[i, k] = len(runs)
            for j, val in enumerate(runs):
                if val is not None:
                    u[i, k, j] = val
    return u, counts


def frontier(path: str, naive: bool) -> str:
    from baer_fast.io.records import read_signals
    from baer_fast.selection import budget
    records = read_signals(path)
    if naive:
        sys.path.insert(0, ROOT)
        from tests.selection.test_budget_scale import batched_oof_ref
        budget.batched_oof = batched_oof_ref
        plan = budget.plan_with_nested.__wrapped__(records, "0.33")[0]
    else:
        plan = budget.plan_budget(records, "0.33")
    return json.dumps(plan, sort_keys=True)


def evaluate_all(path: str, naive: bool) -> str:
    from baer_fast.commands.eval import EVAL_META
    from baer_fast.eval.figures import figures
    from baer_fast.eval.metrics import evaluate
    from baer_fast.features import evidence
    from baer_fast.io.records import read_signals
    from baer_fast.io.splits import roles
    import numpy as np
    if naive:
        evidence._runs = _loop_runs
        records = read_signals(path)
    else:
        records = evidence.MemoRecords(read_signals(path, meta_keys=EVAL_META))
    scores = np.array([float(int(hashlib.sha256(r.id.encode()).hexdigest()[:8], 16)) / 2 ** 31 - 1.0 for r in records])
    rl = roles(records)
    rep = evaluate(records, scores, rl, split="test")
    rep.update(figures(records, scores, rl, split="test", experts=sorted(rep["experts"])))
    return json.dumps(rep, sort_keys=True, default=str)


def fit(path: str, naive: bool) -> str:
    from baer_fast.cli import main
    out = path + (".naive" if naive else ".new") + ".head.json"
    if main(["-q", "fit", "--signals", path, "--condition", "scale", "--out", out,
             "--jobs", "1" if naive else str(os.cpu_count() or 1)]) != 0:
        raise SystemExit("fit failed")
    with open(out) as f:
        return f.read()


def child(what: str, path: str, naive: bool) -> None:
    t = time.perf_counter()
    out = {"frontier": frontier, "eval": evaluate_all, "fit": fit}[what](path, naive)
    print(json.dumps({"seconds": time.perf_counter() - t, "sha256": hashlib.sha256(out.encode()).hexdigest(),
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


def run_child(what: str, path: str, naive: bool) -> dict:
    cmd = [sys.executable, __file__, "--child", what, "--signals", path] + (["--naive"] if naive else [])
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=5000)
    ap.add_argument("--what", choices=("frontier", "eval", "fit", "both", "all"), default="both")
    ap.add_argument("--child", choices=("frontier", "eval", "fit"), help=argparse.SUPPRESS)
    ap.add_argument("--signals", help=argparse.SUPPRESS)
    ap.add_argument("--naive", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args.child, args.signals, args.naive)
        return 0
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    import scale_signals
    result = {"pairs": args.pairs, "load_avg_1m": os.getloadavg()[0], "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "signals.jsonl")
        scale_signals.main(["--pairs", str(args.pairs), "--out", path])
        whats = {"both": ("frontier", "eval"), "all": ("frontier", "eval", "fit")}.get(args.what, (args.what,))
        for what in whats:
            naive, new = run_child(what, path, True), run_child(what, path, False)
            result[what] = {"naive_s": round(naive["seconds"], 2), "new_s": round(new["seconds"], 2),
                            "speedup": round(naive["seconds"] / new["seconds"], 2),
                            "naive_peak_mb": round(naive["peak_rss_mb"]), "new_peak_mb": round(new["peak_rss_mb"]),
                            "identical": naive["sha256"] == new["sha256"]}
            print(f"{what:9} naive {naive['seconds']:8.2f} s {naive['peak_rss_mb']:7.0f} MB   new {new['seconds']:8.2f} s "
                  f"{new['peak_rss_mb']:7.0f} MB   identical {naive['sha256'] == new['sha256']}", file=sys.stderr)
    result["load_avg_1m_end"] = os.getloadavg()[0]
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
