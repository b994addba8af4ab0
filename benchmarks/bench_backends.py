"""Backends: the hf prefix engine vs the vLLM backend on the same prompts (token ids).

Workloads are bench_engine.py's: the DESIGN.md peer anchor (16 pairs of a ~300-token
question and two ~500-token responses; both orders x 6 instructions; P(A) over two labels) and
the single-pass bank (direct, score, pointwise) through `run_experts`. Both backends get the
identical token ids; the vLLM backend runs with prefix caching (and, with --vllm-no-cache, a
second engine without it; with --data-parallel-size N, N replicas in N processes). Each method
gets one untimed warm-up round, then --rounds timed.

    python benchmarks/bench_backends.py [--pairs 16] [--rounds 3] [--backends hf,vllm]

Needs vllm for the vllm rows (the venv of benchmarks/vllm_parity.sh on CPU): without it the default
`--backends hf,vllm` exits with one line before timing anything; `--backends hf` times the hf rows alone. Never asserts;
medians with min/max to stderr, one JSON line to stdout (also to --json PATH).
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
# the checkout goes last: an installed baer_fast (or gpu_check.sh's view with kernels/) wins
sys.path.insert(0, HERE)
sys.path.append(os.path.join(HERE, ".."))


def _timed(fn, rounds: int):
    fn()                                                   # warm-up, untimed
    times, out = [], None
    for _ in range(rounds):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return times, out


def _row(method: str, times, n_pairs: int, tokens: int) -> dict:
    med = statistics.median(times)
    return {"method": method, "pairs_per_s": n_pairs / med, "tokens_prefilled_per_pair": tokens / n_pairs,
            "median_s": med, "min_s": min(times), "max_s": max(times)}


def _max_diff(ra, rb) -> float:
    return max(abs(x - y) for ga, gb in zip(ra.logprobs, rb.logprobs) for qa, qb in zip(ga, gb)
               for x, y in zip(qa, qb))


def bench_engine_pair(name: str, engine, groups, pairs, rounds: int) -> tuple[list[dict], object]:
    """The anchor workload through engine.run and the bank through run_experts."""
    from baer_fast.bank.runner import RunReport, run_experts
    t_anchor, res = _timed(lambda: engine.run(groups), rounds)
    reports: list[RunReport] = []

    def bank():
        reports.append(RunReport())
        return run_experts(engine, pairs, report=reports[-1])
    t_bank, _ = _timed(bank, rounds)
    rows = [_row(f"anchor: {name}", t_anchor, len(groups), res.stats.tokens_prefilled),
            _row(f"single-pass bank: {name}", t_bank, len(pairs), reports[-1].stats.tokens_prefilled)]
    return rows, res


def run(args, folder: str) -> dict:
    import torch

    import baer_fast.runtime.model.readout  # noqa: F401  (bound before bench_engine puts the checkout first)
    import bench_engine
    from baer_fast.runtime.prefill import PrefixEngine
    from baer_fast.runtime.open import load_judge

    model_dir = args.model or bench_engine.build_model(folder)
    loaded = load_judge(model_dir, dtype=args.dtype)
    groups = bench_engine.anchor_groups(loaded, args.pairs)
    pairs = bench_engine.bank_pairs(loaded, args.pairs)
    backends = args.backends.split(",")
    out = {"bench": "backends", "pairs": args.pairs, "rounds": args.rounds, "dtype": str(loaded.dtype),
           "torch_threads": torch.get_num_threads(), "device": str(loaded.device),
           "tokens_naive_anchor_per_pair": sum(len(q.ids) for g in groups for q in g) / args.pairs,
           "rows": []}
    results = {}
    if "hf" in backends:
        rows, results["hf"] = bench_engine_pair("hf prefix engine", PrefixEngine(loaded), groups, pairs, args.rounds)
        out["rows"] += rows
    if "vllm" in backends:
        out.update(_vllm_rows(args, model_dir, groups, pairs, results))
        out["rows"] += out.pop("vllm_rows")
    if "hf" in results and "vllm" in results:
        out["max_abs_logprob_diff_hf_vs_vllm"] = _max_diff(results["hf"], results["vllm"])
    return out


def _vllm_rows(args, model_dir, groups, pairs, results) -> dict:
    from baer_fast.runtime.open import open_vllm
    from baer_fast.runtime.vllm.backend import VllmOptions
    info, rows = {}, []
    variants = [("vllm prefix caching", True, 1)] + ([("vllm no prefix caching", False, 1)] if args.vllm_no_cache else [])
    if args.data_parallel_size > 1:
        variants.append((f"vllm data parallel {args.data_parallel_size}", True, args.data_parallel_size))
    for name, caching, dp in variants:
        t0 = time.perf_counter()
        engine = open_vllm(model_dir, VllmOptions(dtype=args.dtype, prefix_caching=caching,
                                                  block_size=args.block_size, data_parallel_size=dp))
        info[f"{name}: engine_start_s"] = time.perf_counter() - t0
        r, res = bench_engine_pair(name, engine, groups, pairs, args.rounds)
        rows += r
        results.setdefault("vllm", res)
        engine.close()                        # one engine's KV cache at a time
    info["vllm_rows"] = rows
    import vllm
    info["vllm_version"] = vllm.__version__
    return info


def check_backends(backends: list[str]) -> None:
    """Before any timing: unknown names, or vllm asked for where it cannot be imported, exit with one line
    (not a traceback after the hf rows have run for a minute)."""
    unknown = sorted(set(backends) - {"hf", "vllm"})
    if unknown or not backends:
        raise SystemExit(f"bench_backends: --backends takes hf and/or vllm, not {','.join(unknown) or 'nothing'}")
    if "vllm" in backends:
        from baer_fast.errors import BaerError
        from baer_fast.runtime.vllm.backend import require_vllm
        try:
            require_vllm()
        except BaerError as e:
            raise SystemExit(f"bench_backends: {e}; or `--backends hf` for the hf rows alone (no peer)") from None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--backends", default="hf,vllm", help="comma-separated: hf, vllm")
    ap.add_argument("--dtype", default="auto", choices=("auto", "float32", "bfloat16", "float16"))
    ap.add_argument("--model", default=None, help="a local model directory (default: the random anchor model)")
    ap.add_argument("--block-size", type=int, default=None, help="vLLM KV block size (default: vLLM's)")
    ap.add_argument("--vllm-no-cache", action="store_true", help="also time vLLM without prefix caching")
    ap.add_argument("--data-parallel-size", type=int, default=1,
                    help="also time N vLLM replicas (one process each; on CPU each gets its share of the cores)")
    ap.add_argument("--json", default=None, help="also write the JSON line here")
    args = ap.parse_args(argv)
    check_backends(args.backends.split(","))
    with tempfile.TemporaryDirectory() as folder:
        res = run(args, folder)
    for r in res["rows"]:
        print(f"{r['method']:<48} {r['pairs_per_s']:7.3f} pairs/s {r['tokens_prefilled_per_pair']:8.0f} tok/pair "
              f"median {r['median_s']:.2f}s [{r['min_s']:.2f}, {r['max_s']:.2f}]", file=sys.stderr)
    line = json.dumps(res)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            fh.write(line + "\n")
    print(line)
    return 0


if __name__ == "__main__":                 # vLLM spawns worker processes: keep the guard
    sys.exit(main())
