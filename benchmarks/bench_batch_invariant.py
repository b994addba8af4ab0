"""Cost of the batch-invariant mode: the bank batched (default) vs each distinct pair in calls of
its own (`batch_invariant=True`, bank/runner.expert_rows), on the DESIGN peer-anchor model.

Workloads (CPU fp32 unless --device): `single-pass`: the single-pass bank (direct, score,
pointwise, pride, calibraeval) on --pairs synthetic pairs (~300-token question, ~500-token
responses); `reward group`: the same bank on a reward loop's group (one question, --completions
K completions, K(K-1)/2 pairs sharing the question, which batching shares and the mode does
not); `generative`: cot + self_consistency (and natives) with --budget tokens on --gen-pairs
pairs. Rounds interleave the two modes. Also reports the largest |u batched - u invariant| (the
rounding the mode removes). Never asserts; ends with ONE JSON line.

    python benchmarks/bench_batch_invariant.py [--pairs 8] [--rounds 3] [--budget 8]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.append(os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

from random_judge import build_anchor_dir  # noqa: E402


def _timed(fn, rounds: int):
    times, out = [], None
    for _ in range(rounds):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return times, out


def _max_diff(x, y) -> float:
    return max((abs(a - b) for s, t in zip(x, y) for k in s.experts
                for a, b in zip(s.experts[k], t.experts[k]) if a is not None and b is not None), default=0.0)


def workload(label, engine, pairs, experts, rounds, generation=None) -> dict:
    from baer_fast.bank.runner import RunReport, run_experts
    rep = RunReport()
    run_experts(engine, pairs, experts=experts, generation=generation, report=rep)    # fits pride/calibraeval
    params = rep.derived_params

    def call(inv):
        return run_experts(engine, pairs, experts=experts, generation=generation, derived_params=params,
                           batch_invariant=inv)
    times, outs = {False: [], True: []}, {}
    for _ in range(rounds):                     # interleaved: drifting load hits both modes
        for inv in (False, True):
            t, outs[inv] = _timed(lambda: call(inv), 1)
            times[inv] += t
    med = {inv: statistics.median(t) for inv, t in times.items()}
    return {"workload": label, "pairs": len(pairs), "batched_pairs_per_s": len(pairs) / med[False],
            "invariant_pairs_per_s": len(pairs) / med[True], "slowdown": med[True] / med[False],
            "batched_min_s": min(times[False]), "invariant_min_s": min(times[True]),
            "max_abs_u_diff": _max_diff(outs[False], outs[True])}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=8)
    ap.add_argument("--completions", type=int, default=4)
    ap.add_argument("--gen-pairs", type=int, default=4)
    ap.add_argument("--budget", type=int, default=8, help="generation budget of cot and self_consistency")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    from baer_fast import protocols
    from baer_fast.bank.generative import GenerationConfig
    from baer_fast.runtime.open import load_judge, open_engine
    from bench_engine import bank_pairs
    from tests.fixtures.tiny_models import completion_pairs
    with tempfile.TemporaryDirectory() as tmp:
        engine = open_engine(load_judge(build_anchor_dir(tmp), device="cpu", dtype="float32"))
        single = list(protocols.SINGLE_PASS)
        gen = GenerationConfig(max_new_tokens={"cot": args.budget, "self_consistency": args.budget}, seed=1)
        rows = [workload("single-pass", engine, bank_pairs(engine.loaded, args.pairs), single, args.rounds),
                workload("reward group", engine, completion_pairs(engine.loaded.tokenizer, 300,
                                                                  [200 + 50 * k for k in range(args.completions)]),
                         single, args.rounds)]
        if args.gen_pairs:
            rows.append(workload("generative", engine, bank_pairs(engine.loaded, args.gen_pairs),
                                 ["cot", "self_consistency"], args.rounds, gen))
    print(f"{'workload':<14} {'pairs':>5} {'batched p/s':>12} {'invariant p/s':>14} {'slowdown':>9} {'max |du|':>10}",
          file=sys.stderr)
    for r in rows:
        print(f"{r['workload']:<14} {r['pairs']:5d} {r['batched_pairs_per_s']:12.3f} {r['invariant_pairs_per_s']:14.3f} "
              f"{r['slowdown']:9.2f} {r['max_abs_u_diff']:10.2e}", file=sys.stderr)
    print(json.dumps({"rows": rows, "load_avg_1m": os.getloadavg()[0]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
