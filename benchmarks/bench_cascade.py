"""`score --model` with a cascade head: stage 2 reading stage 1's prompt-prefix KV vs prefilling it again.

On the demo's LLMBar Natural sample (real texts) and the CPU anchor model (random weights, the
DESIGN peer-anchor shape), a two-stage head over direct + score + pride (stage 1: direct; tau at
the --exit quantile of |s1|, so that fraction of pairs exits) is run through the CLI as users run
it, with the prefix store (the default) and without it (bank/prefix_store.keeping replaced by a
no-op: what `score --model` did before stage 2 read the KV), rounds interleaved. Reports tokens
prefilled per stage (exact counts) and wall time per run (model load included), and the largest
|u| difference of stage 2's runs between the two (fp32 rounding). Then `Judge` on all the pairs in
one call under a KV budget too small for their prefixes together (--judge-memory-gb): in parts
that fit (PrefixStore.parts, the default), in one part (the store keeps what fits, stage 2
prefills the rest again), and with no store. Never asserts; ends with ONE JSON line.

    python benchmarks/bench_cascade.py [--pairs 48] [--chunk-pairs 16] [--rounds 3] [--exit 0.5]
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from random_judge import build_anchor_dir  # noqa: E402

FULL, STAGE1 = ["direct", "score", "pride"], ["direct"]


def cascade_head(model: str, pairs, path: str, exit_share: float) -> None:
    """Stack heads on every pair's labels (this measures cost, not accuracy), tau at the quantile."""
    import numpy as np

    from baer_fast import artifact
    from baer_fast.bank.runner import RunReport, resolve_experts, run_experts
    from baer_fast.selection.budget import fit_stack
    report = RunReport()
    sig = run_experts(model, pairs, experts=FULL, report=report)
    names, y = list(sig[0].experts), np.array([1.0 if s.label == "a" else -1.0 for s in sig])
    roles = [("selection", "calibration")[i % 2] for i in range(len(sig))]
    head, _ = fit_stack(sig, y, roles, experts=names, categories=["default"])
    s1, _ = fit_stack(sig, y, roles, experts=resolve_experts(STAGE1), categories=["default"])
    tau = float(np.quantile(np.round(np.abs(s1.score(sig)), 9), exit_share))
    artifact.save(path, {"condition": "bench", "head": "stack", "experts": names, "heads": {"stack": head.to_json()},
                         "derived_params": report.derived_params,
                         "cascade": {"stage1": s1.to_json(), "stage1_experts": STAGE1, "tau": tau}})


@contextlib.contextmanager
def measured(mode: str):
    """Inside: the bank's prefill counted per stage -> {"stage1", "stage2": tokens, "parts": stage-1
    calls}; and the prefix store as `mode` says: parts (as shipped), one (one part: the store keeps
    what fits), none (no store)."""
    from baer_fast.bank import prefix_store, runner
    real_rows, real_keeping, counts = runner.expert_rows, prefix_store.keeping, {"stage1": 0, "stage2": 0, "parts": 0}

    def counted(engine, chunk, names, report, generation=None, **kw):
        before = report.stats.tokens_prefilled
        rows = real_rows(engine, chunk, names, report, generation, **kw)
        stage = "stage1" if list(names) == STAGE1 else "stage2"
        counts[stage] += report.stats.tokens_prefilled - before
        counts["parts"] += stage == "stage1"
        return rows

    @contextlib.contextmanager
    def one_part(engine):
        with real_keeping(engine) as store:
            if store is not None:
                store.parts = lambda pairs: [list(range(len(pairs)))]
            yield store
    runner.expert_rows = counted
    prefix_store.keeping = {"parts": real_keeping, "one": one_part,
                            "none": lambda engine: contextlib.nullcontext()}[mode]
    try:
        yield counts
    finally:
        runner.expert_rows, prefix_store.keeping = real_rows, real_keeping


def run_once(model, pairs_path, head_path, out, chunk_pairs: int, keep: bool) -> dict:
    from baer_fast.cli import main
    from baer_fast.io.records import read_signals
    with measured("parts" if keep else "none") as counts:
        t0 = time.perf_counter()
        with contextlib.redirect_stdout(sys.stderr):        # stdout: the one JSON line
            rc = main(["-q", "score", "--model", model, "--input", pairs_path, "--head", head_path, "--out", out,
                       "--chunk-pairs", str(chunk_pairs), "--device", "cpu", "--dtype", "float32"])
        seconds = time.perf_counter() - t0
    if rc != 0:
        raise SystemExit(f"score --model failed (exit {rc})")
    tokens = {k: counts[k] for k in ("stage1", "stage2")}
    return {"seconds": seconds, "tokens": tokens, "stage2": read_signals(out + ".stage2.signals.jsonl")}


def judge_once(model, head_path, pairs, memory_gb: float, mode: str) -> dict:
    """Judge.signals on every pair in one call, the store as `mode` says (`measured`)."""
    from baer_fast import artifact
    from baer_fast.api import Judge, JudgeOptions
    from baer_fast.runtime.config import EngineConfig
    from baer_fast.runtime.open import HfOptions, open_engine
    engine = open_engine(model, options=HfOptions(engine=EngineConfig(memory_budget_bytes=int(memory_gb * 2**30)),
                                                  device="cpu", dtype="float32"))
    judge = Judge(engine, artifact.load(head_path), options=JudgeOptions(batch_invariant=False))
    with measured(mode) as counts:
        t0 = time.perf_counter()
        judge.signals([p.question for p in pairs], [p.response_a for p in pairs], [p.response_b for p in pairs])
        seconds = time.perf_counter() - t0
    return {"seconds": seconds, "tokens": {k: counts[k] for k in ("stage1", "stage2")}, "parts": counts["parts"]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=48)
    ap.add_argument("--chunk-pairs", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--exit", type=float, default=0.5, help="share of pairs that exit after stage 1 (tau's quantile)")
    ap.add_argument("--judge-memory-gb", type=float, default=0.5, help="the Judge runs' memory budget (0: skip them)")
    args = ap.parse_args(argv)
    from baer_fast.commands.demo import sample_pairs
    from baer_fast.io.records import write_pairs
    pairs = sample_pairs(args.pairs)
    with tempfile.TemporaryDirectory() as tmp:
        model = build_anchor_dir(os.path.join(tmp, "anchor"))
        pairs_path, head_path = os.path.join(tmp, "pairs.jsonl"), os.path.join(tmp, "head.json")
        write_pairs(pairs_path, pairs)
        cascade_head(model, pairs, head_path, args.exit)
        runs: dict = {True: [], False: []}
        for r in range(args.rounds):
            for keep in (True, False):
                runs[keep].append(run_once(model, pairs_path, head_path, os.path.join(tmp, f"s{r}{keep}.jsonl"),
                                           args.chunk_pairs, keep))
        judged: dict = {m: [] for m in ("parts", "one", "none")}
        for r in range(args.rounds if args.judge_memory_gb > 0 else 0):
            for mode in judged:
                judged[mode].append(judge_once(model, head_path, pairs, args.judge_memory_gb, mode))
    kv, plain = runs[True][-1], runs[False][-1]
    open_ = len(kv["stage2"])
    du = max((abs(a - b) for x, y in zip(kv["stage2"], plain["stage2"], strict=True) for n in x.experts
              for a, b in zip(x.experts[n], y.experts[n])), default=0.0)
    row = {"pairs": len(pairs), "open_pairs": open_, "exit_fraction": 1 - open_ / len(pairs),
           "chunk_pairs": args.chunk_pairs,
           "stage1_tokens": kv["tokens"]["stage1"],
           "stage2_tokens_kv": kv["tokens"]["stage2"], "stage2_tokens_again": plain["tokens"]["stage2"],
           "tokens_per_pair_kv": sum(kv["tokens"].values()) / len(pairs),
           "tokens_per_pair_again": sum(plain["tokens"].values()) / len(pairs),
           "seconds_kv": statistics.median(x["seconds"] for x in runs[True]),
           "seconds_again": statistics.median(x["seconds"] for x in runs[False]),
           "runs_s_kv": [round(x["seconds"], 2) for x in runs[True]],
           "runs_s_again": [round(x["seconds"], 2) for x in runs[False]],
           "max_abs_u_diff_stage2": du, "rounds": args.rounds, "load_avg_1m": os.getloadavg()[0]}
    if args.judge_memory_gb > 0:
        row["judge"] = {m: {"memory_gb": args.judge_memory_gb, **judged[m][-1]["tokens"],
                            "parts": judged[m][-1]["parts"],
                            "seconds": statistics.median(x["seconds"] for x in judged[m]),
                            "runs_s": [round(x["seconds"], 2) for x in judged[m]]} for m in judged}
        for m, v in row["judge"].items():
            print(f"Judge, {args.judge_memory_gb} GB, {m}: stage 1 {v['stage1']} + stage 2 {v['stage2']} tokens "
                  f"({v['parts']} part(s)), {v['seconds']:.2f}s", file=sys.stderr)
    print(f"{len(pairs)} LLMBar pairs, {open_} open; stage 2 prefilled {row['stage2_tokens_kv']} tokens with stage 1's "
          f"prefix KV vs {row['stage2_tokens_again']} again; per pair {row['tokens_per_pair_kv']:.0f} vs "
          f"{row['tokens_per_pair_again']:.0f}; run {row['seconds_kv']:.2f}s vs {row['seconds_again']:.2f}s "
          f"(median of {args.rounds}); max |du| stage 2 {du:.1e}", file=sys.stderr)
    print(json.dumps(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
