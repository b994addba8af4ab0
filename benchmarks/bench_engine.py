"""Engine throughput: the DESIGN.md peer-anchor workload, naive vs prefix-shared, in one run.

Workload: Qwen3 architecture with random weights (4 layers, hidden 256, 4 heads, head_dim 64,
intermediate 768, 32,768-row vocabulary, fp32) loaded from a local directory through the
normal loader; per pair a ~300-token question and two ~500-token responses rendered with the
chat template; both display orders x 6 prompts that share [system][question][A][B] and differ
in a ~40-token instruction; verdict P(A) over the two label tokens. A second workload runs the
actual single-pass bank (direct, score, pointwise; pride/calibraeval are derived, no prompts).
A third is a reward loop's group (`--completions K`, 0 skips it): one question, K completions,
all K(K-1)/2 pairs through the same bank, whose pairs share one tree per question. A fourth runs
the bank on real lengths (`--sample-pairs N`, 0 skips it): the first N pairs of the LLMBar
Natural sample the demo ships, whose questions and responses differ pair to pair, so each level
batches rows over very different pasts.
`--full-bank TOKENS` adds exact (untimed) counts of what the whole bank, generative experts
included, prefills per pair.

    python benchmarks/bench_engine.py [--pairs 16] [--rounds 3]    # table + one JSON line
    python benchmarks/bench_engine.py --shape qwen3-8b --device cuda --memory-gb 48 --warmup 1
                                        # a GPU: 8B-shaped random weights built on the device, bf16
    pytest benchmarks/bench_engine.py --benchmark-only               # pytest-benchmark form

Never asserts; reports medians (and min/max) over rounds, ending with one JSON line. On a
shared machine compare min as well as median: other processes inflate single rounds, and with
torch using every core one busy core can slow a round several-fold (threads wait at each op's
barrier), so note `load_avg_1m` and rerun when it is above zero.
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
sys.path.append(os.path.join(HERE, ".."))      # after an installed baer_fast (kernels/ is mapped in by setup.py)
sys.path.insert(0, HERE)

from random_judge import SHAPES, add_model_arguments, build_anchor_dir, load_random  # noqa: E402

ARCH = SHAPES["anchor"]
Q_TOKENS, R_TOKENS, INSTR_TOKENS, N_INSTR = 300, 500, 40, 6


def build_model(folder: str) -> str:
    return build_anchor_dir(folder)


def anchor_groups(loaded, n_pairs: int):
    """Per pair: 2 orders x 6 instructions over the shared [system][question][A][B] skeleton."""
    from baer_fast.protocols.base import ORDERS, Prompt, pairwise_segments
    from baer_fast.bank.prompting import PromptEncoder
    from baer_fast.runtime.queries import Query
    from tests.fixtures.tiny_models import text_of_tokens

    enc = PromptEncoder(loaded.tokenizer, model_name="bench", context_len=loaded.context_len)
    choices = enc.label_ids(("A", "B"))
    instr = [text_of_tokens(enc.tok, INSTR_TOKENS, 1000 + k) + " Reply A or B." for k in range(N_INSTR)]
    groups = []
    for i in range(n_pairs):
        q = text_of_tokens(enc.tok, Q_TOKENS, 3 * i)
        a, b = text_of_tokens(enc.tok, R_TOKENS, 3 * i + 1), text_of_tokens(enc.tok, R_TOKENS, 3 * i + 2)
        prompts = [Prompt(f"{o}/{k}", pairwise_segments(q, a, b, o, instr[k]), ("A", "B"))
                   for o in ORDERS for k in range(N_INSTR)]
        groups.append([Query(enc.encode(p, pair_id=str(i), expert="anchor"), choices) for p in prompts])
    return groups


def bank_pairs(loaded, n_pairs: int):
    from baer_fast.io.records import Pair
    from tests.fixtures.tiny_models import text_of_tokens
    t = loaded.tokenizer
    return [Pair(f"b{i}", text_of_tokens(t, Q_TOKENS, 3 * i), text_of_tokens(t, R_TOKENS, 3 * i + 1),
                 text_of_tokens(t, R_TOKENS, 3 * i + 2), split="selection") for i in range(n_pairs)]


def _time_pair(fn_a, fn_b, rounds: int, warmup: int = 0):
    """Interleave the two methods round by round, so drifting load on a shared machine hits both.
    `warmup` untimed calls of each first (a GPU's first calls pay for kernel selection)."""
    for _ in range(warmup):
        fn_a(), fn_b()
    ta, tb, out_a, out_b = [], [], None, None
    for _ in range(rounds):
        for fn, times, slot in ((fn_a, ta, 0), (fn_b, tb, 1)):
            t0 = time.perf_counter()
            res = fn()
            times.append(time.perf_counter() - t0)
            out_a, out_b = (res, out_b) if slot == 0 else (out_a, res)
    return ta, tb, out_a, out_b


def _row(name, times, n_pairs, tokens, flops):
    """flops: the model FLOPs of one timed call (queries.FlopModel: matrices and attention scores as computed)."""
    med = statistics.median(times)
    return {"method": name, "pairs_per_s": n_pairs / med, "tokens_per_s": tokens / med,
            "tokens_per_pair": tokens / n_pairs, "gflop_per_pair": flops / n_pairs / 1e9,
            "gflop_per_s": flops / med / 1e9, "median_s": med, "min_s": min(times), "max_s": max(times)}


# The README's bank row: direct x2, score x4, pointwise x2 prompts (pride re-weights direct).
# CalibraEval's label-exchanged prompts share no [A][B] with them and are not in this row.
BANK = ("direct", "score", "pointwise", "pride")


def _bank_workload(label: str, loaded, pairs, config, rounds: int, warmup: int):
    """The single-pass bank on `pairs`, naive vs prefix engine -> (naive times, engine times, two rows)."""
    from baer_fast.runtime.model.flops import flop_model
    from baer_fast.bank.runner import RunReport, run_experts
    rep_n, rep_p = RunReport(), RunReport()
    t_n, t_p, _, _ = _time_pair(lambda: run_experts(loaded, pairs, experts=list(BANK), naive=True, report=rep_n),
                                lambda: run_experts(loaded, pairs, experts=list(BANK), config=config, report=rep_p),
                                rounds, warmup)
    calls, fm = rounds + warmup, flop_model(loaded)
    return t_n, t_p, [_row(f"{label}: {method}", times, len(pairs), rep.stats.tokens_prefilled // calls,
                           fm.of(rep.stats) // calls)
                      for method, times, rep in (("naive", t_n, rep_n), ("prefix engine", t_p, rep_p))]


def least_gflop_per_pair(loaded, pairs) -> float:
    """GFLOP per pair of the single-pass bank when each distinct prefix of a pair's prompts is
    computed once, every token over exactly its own prefix: the least any exact engine computes."""
    from baer_fast import protocols
    from baer_fast.runtime.model.flops import flop_model
    from baer_fast.runtime.plan.prefix_tree import build_tree, tree_scores, tree_tokens
    from baer_fast.bank.prompting import PromptEncoder
    from baer_fast.bank.queries import build_all_queries
    enc = PromptEncoder.of(loaded)
    trees = [build_tree([q.ids for q in group]) for group, _ in
             build_all_queries(enc, pairs, protocols.prompt_experts_for(BANK))]
    fm = flop_model(loaded)
    return sum(fm.flops(tree_tokens(t), tree_scores(t)) for t in trees) / len(pairs) / 1e9


GENERATIVE_MIXES = {"cot": ["cot"], "cot+deliberate+self_consistency": ["cot", "deliberate", "self_consistency"]}


def full_bank_tokens(loaded, n_pairs: int, budget: int) -> dict:
    """Tokens prefilled per pair by the whole bank (`--experts all`, every generation capped at
    `budget` tokens) on the bank pairs, engine and decoder apart, against one plain forward per
    prompt (RunReport.prefill_totals); and by the single-pass bank with each GENERATIVE_MIXES
    entry (their single-pass prompts are prompt reads in the decoder's tree). Exact counts, not
    timed."""
    from baer_fast import protocols
    from baer_fast.bank.generative import GenerationConfig
    from baer_fast.bank.runner import RunReport, run_experts
    gen = GenerationConfig(max_new_tokens={n: budget for n in protocols.GENERATIVE})
    pairs = bank_pairs(loaded, n_pairs)

    def count(experts):
        rep = RunReport()
        run_experts(loaded, pairs, experts=experts, generation=gen, report=rep)
        shared, naive = rep.prefill_totals()
        return rep, {"tokens_per_pair": shared / n_pairs, "naive_tokens_per_pair": naive / n_pairs,
                     "fewer": naive / shared}
    rep, out = count(list(protocols.ALL))
    g = rep.generative
    out.update({"pairs": n_pairs, "max_new_tokens": budget,
                "engine_tokens_per_pair": rep.stats.tokens_prefilled / n_pairs,
                "decoder_tokens_per_pair": g.decode_prefilled / n_pairs,
                "decoded_tokens_per_pair": sum(c.tokens_decoded for c in g.cost.values()) / n_pairs,
                "single_pass_with": {name: count(list(BANK) + mix)[1]
                                     for name, mix in GENERATIVE_MIXES.items()}})
    return out


def run(n_pairs: int, rounds: int, folder: str, *, shape: str = "anchor", device: str = "auto",
        dtype: str = "auto", memory_gb: float | None = None, warmup: int = 0, completions: int = 4,
        full_bank: int = 0, sample_pairs: int = 0) -> dict:
    import torch

    from baer_fast.runtime.config import EngineConfig
    from baer_fast.runtime.prefill import PrefixEngine
    from baer_fast.runtime.model.flops import flop_model
    from baer_fast.runtime.naive import NaiveEngine

    loaded = load_random(folder, shape, device=device, dtype=dtype)
    config = EngineConfig() if memory_gb is None else EngineConfig(memory_budget_bytes=int(memory_gb * 2**30))
    groups = anchor_groups(loaded, n_pairs)
    naive, prefix = NaiveEngine(loaded), PrefixEngine(loaded, config)
    rows, fm = [], flop_model(loaded)
    t_naive, t_prefix, r_naive, r_prefix = _time_pair(lambda: naive.run(groups), lambda: prefix.run(groups), rounds,
                                                      warmup)
    diff = max(abs(x - y) for ga, gb in zip(r_naive.logprobs, r_prefix.logprobs)
               for qa, qb in zip(ga, gb) for x, y in zip(qa, qb))
    rows.append(_row("anchor: naive, one prompt per forward, last position", t_naive, n_pairs,
                     r_naive.stats.tokens_prefilled, fm.of(r_naive.stats)))
    rows.append(_row("anchor: prefix engine", t_prefix, n_pairs, r_prefix.stats.tokens_prefilled, fm.of(r_prefix.stats)))
    bank = bank_pairs(loaded, n_pairs)
    t_bn, t_bp, bank_rows = _bank_workload("single-pass bank", loaded, bank, config, rounds, warmup)
    rows += bank_rows
    ratio = lambda a, b: statistics.median(x / y for x, y in zip(a, b))    # noqa: E731
    optional = {}
    if completions:
        from tests.fixtures.tiny_models import completion_pairs
        cp = completion_pairs(loaded.tokenizer, Q_TOKENS, (R_TOKENS,) * completions, seed=7)
        t_gn, t_gp, group_rows = _bank_workload(f"reward-loop group, {completions} completions", loaded, cp, config,
                                                rounds, warmup)
        rows += group_rows
        optional = {"completions": completions, "speedup_group": group_rows[0]["median_s"] / group_rows[1]["median_s"],
                    "speedup_group_paired_median": ratio(t_gn, t_gp)}
    if sample_pairs:
        from baer_fast.commands.demo import sample_pairs as demo_pairs
        real = demo_pairs(sample_pairs)
        t_rn, t_rp, real_rows = _bank_workload(f"LLMBar sample, {len(real)} pairs of real lengths", loaded, real,
                                               config, rounds, warmup)
        rows += real_rows
        naive_gflop = real_rows[0]["gflop_per_pair"]
        optional.update({"sample_pairs": len(real),
                         "speedup_sample": real_rows[0]["median_s"] / real_rows[1]["median_s"],
                         "speedup_sample_paired_median": ratio(t_rn, t_rp),
                         "fewer_flops_sample": naive_gflop / real_rows[1]["gflop_per_pair"],
                         "fewer_flops_sample_ceiling": naive_gflop / least_gflop_per_pair(loaded, real)})
    if full_bank:
        optional["full_bank"] = full_bank_tokens(loaded, min(n_pairs, 4), full_bank)
    return {"bench": "engine", "load_avg_1m": os.getloadavg()[0], "threads": torch.get_num_threads(),
            "pairs": n_pairs, "rounds": rounds, "warmup": warmup, "shape": shape, "arch": SHAPES[shape],
            "device": str(loaded.device), "dtype": str(loaded.dtype),
            "memory_budget_bytes": config.memory_budget_bytes, "max_abs_logprob_diff": diff,
            "kv_peak_bytes_prefix": r_prefix.stats.kv_bytes_peak, "forwards_prefix": r_prefix.stats.forwards,
            "speedup_anchor": rows[0]["median_s"] / rows[1]["median_s"],
            "speedup_bank": rows[2]["median_s"] / rows[3]["median_s"],
            "speedup_anchor_paired_median": ratio(t_naive, t_prefix),
            "speedup_bank_paired_median": ratio(t_bn, t_bp),
            # the token ratios: what the speedups would be if every prefilled token cost the same
            "fewer_tokens_anchor": rows[0]["tokens_per_pair"] / rows[1]["tokens_per_pair"],
            "fewer_tokens_bank": rows[2]["tokens_per_pair"] / rows[3]["tokens_per_pair"],
            # the FLOP ratios (tokens through the matrices, attention scores as computed), and the
            # bank's ceiling: naive FLOPs over the least any exact engine computes
            "fewer_flops_anchor": rows[0]["gflop_per_pair"] / rows[1]["gflop_per_pair"],
            "fewer_flops_bank": rows[2]["gflop_per_pair"] / rows[3]["gflop_per_pair"],
            "fewer_flops_bank_ceiling": rows[2]["gflop_per_pair"] / least_gflop_per_pair(loaded, bank),
            **optional, "rows": rows}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=0, help="untimed calls of each method first (use 1 on a GPU)")
    add_model_arguments(ap)
    ap.add_argument("--memory-gb", type=float, default=None, help="the prefix engine's memory budget (default: EngineConfig's)")
    ap.add_argument("--completions", type=int, default=4,
                    help="the reward-loop workload's completions per question (all pairs of them; 0 skips it)")
    ap.add_argument("--sample-pairs", type=int, default=16,
                    help="the real-lengths workload's pairs, from the demo's LLMBar Natural sample (0 skips it)")
    ap.add_argument("--full-bank", type=int, default=0, metavar="TOKENS",
                    help="also count the tokens the whole bank (--experts all) prefills per pair, every "
                         "generation capped at TOKENS (exact counts on up to 4 pairs, not timed; 0 skips it)")
    ap.add_argument("--json", default=None, help="also write the JSON line here")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        res = run(args.pairs, args.rounds, folder, shape=args.shape, device=args.device, dtype=args.dtype,
                  memory_gb=args.memory_gb, warmup=args.warmup, completions=args.completions,
                  full_bank=args.full_bank, sample_pairs=args.sample_pairs)
    for r in res["rows"]:
        print(f"{r['method']:<58} {r['pairs_per_s']:7.3f} pairs/s {r['tokens_per_s']:9.0f} tok/s "
              f"{r['tokens_per_pair']:8.0f} tok/pair {r['gflop_per_pair']:7.2f} GFLOP/pair {r['gflop_per_s']:6.1f} GFLOP/s"
              f"  median {r['median_s']:.2f}s [{r['min_s']:.2f}, {r['max_s']:.2f}]",
              file=sys.stderr)
    if "full_bank" in res:
        fb = res["full_bank"]
        print(f"whole bank (--experts all, {fb['max_new_tokens']}-token generations): {fb['tokens_per_pair']:.1f} "
              f"tok/pair prefilled (engine {fb['engine_tokens_per_pair']:.1f}, decoder "
              f"{fb['decoder_tokens_per_pair']:.0f}) vs {fb['naive_tokens_per_pair']:.1f} naive: {fb['fewer']:.2f}x fewer",
              file=sys.stderr)
        for name, m in fb["single_pass_with"].items():
            print(f"single-pass bank + {name}: {m['tokens_per_pair']:.1f} tok/pair prefilled vs "
                  f"{m['naive_tokens_per_pair']:.1f} naive: {m['fewer']:.2f}x fewer", file=sys.stderr)
    print(json.dumps(res))
    if args.json:
        with open(args.json, "w") as f:
            f.write(json.dumps(res) + "\n")
    return 0


# ------------------------------------------------------------------ pytest-benchmark form
try:
    import pytest
except ImportError:            # script use without pytest installed
    pytest = None

if pytest is not None:
    BENCH_PAIRS = int(os.environ.get("BENCH_PAIRS", "4"))

    @pytest.fixture(scope="module")
    def workload(tmp_path_factory):
        loaded = load_random(str(tmp_path_factory.mktemp("bench_model")))
        return loaded, anchor_groups(loaded, BENCH_PAIRS)

    def test_anchor_naive(benchmark, workload):
        from baer_fast.runtime.naive import NaiveEngine
        loaded, groups = workload
        benchmark.extra_info["pairs"] = len(groups)
        benchmark.pedantic(NaiveEngine(loaded).run, args=(groups,), rounds=2, iterations=1)

    def test_anchor_prefix(benchmark, workload):
        from baer_fast.runtime.prefill import PrefixEngine
        loaded, groups = workload
        benchmark.extra_info["pairs"] = len(groups)
        benchmark.pedantic(PrefixEngine(loaded).run, args=(groups,), rounds=3, iterations=1)


if __name__ == "__main__":
    sys.exit(main())
