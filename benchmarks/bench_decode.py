"""Generative-bank throughput: HF `generate` per prompt vs the shared-prefix batched decoder.

Workload: the anchor Qwen3-architecture model (4 layers, hidden 256, 32k vocab, fp32, random
weights; `random_judge.py`), or with `--shape qwen3-8b` an 8B-shaped one on a GPU (bf16); per pair a ~Q-token question and two
~R-token responses; the six generative experts (cot, self_consistency x5 samples, rubric,
prepair, deliberate, reference) with one budget for all (random weights rarely emit EOS, so
every row decodes its full budget: tokens decoded are the same for both paths).

  naive:  every generation request through `model.generate` alone (samples via
          num_return_sequences, which prefills each copy), verdicts by one plain forward per
          readout prompt (NaiveEngine);
  engine: decode.Decoder (one prefill per prompt, samples expanded from it, all rows of all
          pairs in one continuously batched decode), verdicts by the prefix engine.
  vllm:   (when vllm is importable: the venv of benchmarks/vllm_parity.sh) the vLLM backend's
          engine and decoder on the same model directory and pairs (anchor shape only; its
          engine start is timed apart).

The decoder's decode steps are split into the model forward (with the LM head) and everything
else (sampling, stop checks, retiring, planning), and set against a floor: the FLOPs of the
tokens decoded (2 per weight per token, the LM head, each row's own attention scores) over the
matrix-product rate measured in the same run at the decode step's shape.

    python benchmarks/bench_decode.py [--pairs 4] [--rounds 1] [--budget 32] [--shape anchor] [--sample] [--unsplit]
    python benchmarks/bench_decode.py --shape qwen3-8b --device cuda --warmup 1 --memory-gb 48   # a GPU
    pytest benchmarks/bench_decode.py --benchmark-only

`--sample` takes the pairs from the LLMBar Natural sample the demo ships instead (real lengths:
every row's context its own; the JSON's decoder_stats hold scores_decoded against
scores_decoded_own). `--unsplit` adds a third path: the same decoder with every decode step
over the widest row's columns (no width groups), side by side with the split steps.

Never asserts; medians (and min/max) over rounds, then one JSON line. On the shared 2-core CPU
other processes inflate single rounds: compare min as well as median.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.append(os.path.join(HERE, ".."))      # after an installed baer_fast (kernels/ is mapped in by setup.py)
sys.path.insert(0, HERE)

EXPERTS = ["cot", "self_consistency", "rubric", "prepair", "deliberate", "reference"]
Q_TOKENS, R_TOKENS = 150, 250


class HFGenerate:
    """The naive decoder: `model.generate` once per request (same GenRequest/GenResult types)."""
    reads_prompts = exports_prefixes = False      # interfaces.Decoder: a plain decoder
    stats = None

    def __init__(self, loaded):
        from baer_fast.runtime.decode import eos_token_ids
        self.loaded, self.eos = loaded, eos_token_ids(loaded)
        self.tokens_decoded = 0

    def generate(self, requests):
        import torch

        from baer_fast.runtime.decode import GenResult
        out = []
        for req in requests:
            ids = torch.tensor([req.prompt], device=self.loaded.device)
            kw = dict(do_sample=True, temperature=req.temperature, top_p=req.top_p, top_k=0) \
                if req.temperature > 0 else dict(do_sample=False)
            if req.stop:
                kw.update(stop_strings=list(req.stop), tokenizer=self.loaded.tokenizer)
            if req.seeds:
                torch.manual_seed(req.seeds[0])
            t0 = time.perf_counter()
            gen = self.loaded.model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=req.max_new_tokens,
                                             num_return_sequences=req.samples, **kw)[:, len(req.prompt):].tolist()
            toks = [tuple(_cut(g, self.eos)) for g in gen]
            self.tokens_decoded += sum(len(t) for t in toks)
            out.append(GenResult(toks, ["eos" if t and t[-1] in self.eos else "length" for t in toks],
                                 time.perf_counter() - t0))
        return out


def _cut(g, eos):
    """generate pads finished rows of a multi-sequence call: keep up to the first EOS."""
    for i, t in enumerate(g):
        if t in eos:
            return g[: i + 1]
    return g


def bank_pairs(loaded, n_pairs: int):
    from baer_fast.io.records import Pair
    from tests.fixtures.tiny_models import text_of_tokens
    t = loaded.tokenizer
    return [Pair(f"d{i}", text_of_tokens(t, Q_TOKENS, 3 * i), text_of_tokens(t, R_TOKENS, 3 * i + 1),
                 text_of_tokens(t, R_TOKENS, 3 * i + 2), split="selection") for i in range(n_pairs)]


def _run(loaded, pairs, budget: int, naive, memory_gb: float | None = None, split: bool = True,
         check_every: int | None = None):
    """-> (rows, tokens decoded, GenerativeReport, the decoder's DecodeStats or None).
    split: the decoder's steps attend in width groups (False: every row over the widest)."""
    from baer_fast.runtime.config import EngineConfig
    from baer_fast.runtime.decode import Decoder
    from baer_fast.runtime.prefill import PrefixEngine
    from baer_fast.bank.generative import GenerationConfig, GenerativeReport, run_generative
    from baer_fast.runtime.naive import NaiveEngine
    cfg = GenerationConfig(max_new_tokens={n: budget for n in EXPERTS}, seed=0)
    budget_kw = {} if memory_gb is None else {"memory_budget_bytes": int(memory_gb * 2**30)}
    rep = GenerativeReport()
    if naive == "vllm":             # `loaded` is a VllmEngine here: its own decoder
        rows = run_generative(loaded, pairs, EXPERTS, config=cfg, report=rep)
        return rows, sum(c.tokens_decoded for c in rep.cost.values()), rep, None
    dec = HFGenerate(loaded) if naive else Decoder(loaded, split_attention=split, check_every=check_every, **budget_kw)
    engine = NaiveEngine(loaded) if naive else PrefixEngine(loaded, EngineConfig(**budget_kw))
    rows = run_generative(engine, pairs, EXPERTS, config=cfg, report=rep, decoder=dec)
    decoded = sum(c.tokens_decoded for c in rep.cost.values())
    return rows, decoded, rep, None if naive else dec.stats


def _row(name, times, n_pairs, decoded):
    med = statistics.median(times)
    return {"method": name, "pairs_per_s": n_pairs / med, "decoded_tokens_per_s": decoded / med,
            "decoded_per_pair": decoded / n_pairs, "median_s": med, "min_s": min(times), "max_s": max(times)}


def matmul_rate(loaded, rows: int, *, repeats: int = 5) -> float:
    """FLOP/s of the model's dtype and device on a decode step's largest product: [rows, hidden]
    x [hidden, intermediate] (median of `repeats`)."""
    import torch
    cfg = loaded.model.config.get_text_config()
    dev, dt = loaded.device, loaded.dtype
    a = torch.randn(max(1, rows), cfg.hidden_size, device=dev).to(dt)
    b = torch.randn(cfg.hidden_size, cfg.intermediate_size, device=dev).to(dt)
    times = []
    for _ in range(repeats + 1):
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        t0 = time.perf_counter()
        for _ in range(10):
            a @ b
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        times.append((time.perf_counter() - t0) / 10)
    return 2 * a.shape[0] * a.shape[1] * b.shape[1] / statistics.median(times[1:])


def decode_floor(loaded, stats, rate: float) -> dict:
    """The decoded tokens' FLOPs (their matrices, the LM head, each row's own attention scores)
    and the seconds they take at `rate`, beside the decode steps' measured time."""
    from baer_fast.runtime.model.flops import flop_model
    fm = flop_model(loaded)
    cfg = loaded.model.config.get_text_config()
    flops = fm.flops(stats.tokens_decoded, stats.scores_decoded_own) + 2 * cfg.hidden_size * cfg.vocab_size * \
        stats.tokens_decoded
    other = stats.step_seconds - stats.step_forward_seconds - stats.cue_seconds
    return {"decoded_gflop": flops / 1e9, "matmul_gflop_per_s": rate / 1e9, "floor_s": flops / rate,
            "step_s": stats.step_seconds, "step_forward_s": stats.step_forward_seconds,
            "step_cue_reads_s": stats.cue_seconds, "step_other_s": other,
            "other_share_of_steps": other / max(stats.step_seconds, 1e-12),
            "blocks": stats.blocks, "steps": stats.steps, "tokens_overshoot": stats.tokens_overshoot,
            "steps_over_floor": stats.step_seconds / max(flops / rate, 1e-12)}


def _vllm(folder: str, pairs, budget: int, rounds: int):
    """The vLLM backend on the anchor model directory -> (row, results of the last round, start seconds) or None."""
    import importlib.util
    if importlib.util.find_spec("vllm") is None:
        return None
    from random_judge import build_anchor_dir

    from baer_fast.runtime.vllm.backend import VllmEngine, VllmOptions
    t0 = time.perf_counter()
    engine = VllmEngine.from_path(build_anchor_dir(folder), VllmOptions())
    start = time.perf_counter() - t0
    times, res = [], None
    try:
        for _ in range(rounds):
            t0 = time.perf_counter()
            res = _run(engine, pairs, budget, "vllm")
            times.append(time.perf_counter() - t0)
    finally:
        engine.close()
    return _row("generative bank: the vLLM backend (its decoder and readout)", times, len(pairs), res[1]), res, start


def run(n_pairs: int, rounds: int, budget: int, folder: str, shape: str = "anchor", device: str = "auto",
        dtype: str = "auto", *, warmup: int = 0, memory_gb: float | None = None, sample: bool = False,
        unsplit: bool = False, check_every: int | None = None, no_hf: bool = False, no_vllm: bool = False) -> dict:
    import torch
    from random_judge import SHAPES, load_random

    loaded = load_random(folder, shape, device=device, dtype=dtype)
    if sample:
        from baer_fast.commands.demo import sample_pairs
        pairs = sample_pairs(n_pairs)
    else:
        pairs = bank_pairs(loaded, n_pairs)
    for _ in range(warmup):          # untimed: a GPU's first calls pay for library set-up and kernel choice
        for naive in (True, False):
            _run(loaded, pairs[:1], 4, naive, memory_gb)
    # True: HF generate; False: the decoder; "unsplit": the decoder, every row over the widest
    times, results = {m: [] for m in (True, False, "unsplit")[: 3 if unsplit else 2] if not (no_hf and m is True)}, {}
    for _ in range(rounds):          # interleaved, so load from other processes hits all alike
        for m in times:
            t0 = time.perf_counter()
            results[m] = _run(loaded, pairs, budget, m is True, memory_gb, split=m != "unsplit", check_every=check_every)
            times[m].append(time.perf_counter() - t0)
    rows = [_row("generative bank: HF generate per prompt + naive readout", times[True], n_pairs, results[True][1])
            if not no_hf else None,
            _row("generative bank: batched shared-prefix decoder + prefix readout", times[False], n_pairs,
                 results[False][1])]
    optional = {}
    if unsplit:
        rows.append(_row("generative bank: the decoder, steps over the widest row", times["unsplit"], n_pairs,
                         results["unsplit"][1]))
        optional = {"unsplit_decoder_stats": dataclasses.asdict(results["unsplit"][3]),
                    "speedup_split_attention": rows[2]["median_s"] / rows[1]["median_s"]}
    greedy = ["cot", "rubric", "prepair", "deliberate", "reference"]

    def diff(x, y):
        return max(abs(u - v) for a, b in zip(results[x][0], results[y][0]) for n in greedy
                   for u, v in zip(a["runs"][n], b["runs"][n]))
    if unsplit:
        optional["max_abs_u_diff_split_unsplit"] = diff(False, "unsplit")
    if not no_hf:
        optional.update({"max_abs_u_diff_greedy_experts": diff(True, False),
                         "speedup": rows[0]["median_s"] / rows[1]["median_s"],
                         "speedup_per_round": [a / b for a, b in zip(times[True], times[False])],
                         "speedup_min": rows[0]["min_s"] / rows[1]["min_s"]})
    cost = {n: {"calls": c.calls, "rows": c.rows, "tokens_decoded": c.tokens_decoded, "seconds": c.seconds}
            for n, c in results[False][2].cost.items()}
    optional["floor"] = decode_floor(loaded, results[False][3], matmul_rate(loaded, results[False][3].rows_peak))
    vllm = _vllm(folder, pairs, budget, rounds) if shape == "anchor" and not no_vllm else None
    if vllm is not None:
        rows.append(vllm[0])
        optional.update({"vllm_engine_start_s": vllm[2], "decoder_vs_vllm": vllm[0]["median_s"] / rows[1]["median_s"],
                         "max_abs_u_diff_greedy_vllm": max(abs(u - v) for a, b in zip(results[False][0], vllm[1][0])
                                                           for n in greedy for u, v in zip(a["runs"][n], b["runs"][n]))})
    return {"bench": "decode", "load_avg_1m": os.getloadavg()[0], "threads": torch.get_num_threads(),
            "pairs": n_pairs, "rounds": rounds, "warmup": warmup, "memory_gb": memory_gb, "budget": budget,
            "q_tokens": None if sample else Q_TOKENS, "r_tokens": None if sample else R_TOKENS,
            "sample": sample, "decoder_stats": dataclasses.asdict(results[False][3]),
            "shape": shape, "arch": SHAPES[shape], "device": str(loaded.device),
            "dtype": str(loaded.dtype), "check_every": check_every, "engine_cost": cost, **optional,
            "rows": [r for r in rows if r is not None]}


def memory_rate(loaded) -> float:
    """Bytes/s of a large on-device copy (read + write), the weights-read floor's bandwidth."""
    import torch
    dev = loaded.device
    n = (1 << 28) if dev.type == "cuda" else (1 << 25)
    a = torch.empty(n, dtype=torch.uint8, device=dev)
    b = torch.empty_like(a)
    times = []
    for _ in range(4):
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        t0 = time.perf_counter()
        b.copy_(a)
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        times.append(time.perf_counter() - t0)
    return 2 * n / statistics.median(times[1:])


def decode_steps(loaded, rows: int, prompt_tokens: int, budget: int, kernels: str, graphs: str = "off") -> dict:
    """`rows` greedy rows of `prompt_tokens` each decoding `budget` tokens together (EOS off): the
    decoder's tokens/s and step time, its forward share, and the floor of reading the weights once
    per step at the device's measured copy bandwidth. graphs "auto": steps replayed from a CUDA
    graph where its probe passes (the capture is timed with the first block)."""
    from baer_fast.runtime.decode import Decoder, GenRequest
    vocab = loaded.model.get_input_embeddings().num_embeddings
    reqs = [GenRequest(tuple((r * 7919 + i * 31) % (vocab - 10) + 10 for i in range(prompt_tokens)), budget)
            for r in range(rows)]
    dec = Decoder(loaded, eos_ids=(), kernels=kernels, max_rows=rows, memory_budget_bytes=64 << 30, graphs=graphs)
    dec.generate(reqs)
    s = dec.stats
    weight_bytes = sum(p.numel() * p.element_size() for p in loaded.model.parameters())
    floor = weight_bytes / memory_rate(loaded)
    return {"kernels": kernels, "decode_kernel": dec._kernel, "graphs": dec.graphs, "blocks": s.blocks,
            "decode_tokens_per_s": s.tokens_decoded / max(s.step_seconds, 1e-12), "rows": rows, "prompt_tokens": prompt_tokens,
            "budget": budget, "steps": s.steps, "tokens_per_s": s.tokens_decoded / max(s.seconds, 1e-12),
            "step_ms": 1e3 * s.step_seconds / max(s.steps, 1), "step_forward_ms": 1e3 * s.step_forward_seconds / max(s.steps, 1),
            "weights_read_floor_ms": 1e3 * floor, "weight_gib": weight_bytes / 2**30}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--budget", type=int, default=32, help="max new tokens for every generative expert")
    ap.add_argument("--warmup", type=int, default=0,
                    help="untimed runs of both paths on one pair first (use 1 on a GPU)")
    ap.add_argument("--memory-gb", type=float, default=None,
                    help="the decoder's and the readout engine's memory budget (default: theirs)")
    ap.add_argument("--sample", action="store_true",
                    help="pairs from the demo's LLMBar Natural sample (real lengths) instead of synthetic ones")
    ap.add_argument("--unsplit", action="store_true",
                    help="also time the decoder with every decode step over the widest row (no width groups)")
    ap.add_argument("--steps", type=int, default=0, metavar="ROWS",
                    help="instead: ROWS greedy rows decoding together, masked path (kernels torch) and kernel path "
                         "(kernels auto) side by side: tokens/s, step time, the weights-read floor")
    ap.add_argument("--prompt-tokens", type=int, default=512, help="with --steps: prompt length of every row")
    ap.add_argument("--check-every", type=int, default=None,
                    help="the decoder's steps per host read of the chosen ids (default: the decoder's)")
    ap.add_argument("--no-hf", action="store_true", help="skip HF generate (the decoder and vLLM only)")
    ap.add_argument("--no-vllm", action="store_true", help="skip the vLLM backend even where importable")
    from random_judge import add_model_arguments
    add_model_arguments(ap)
    args = ap.parse_args(argv)
    if args.steps:
        from random_judge import load_random
        with tempfile.TemporaryDirectory() as folder:
            loaded = load_random(folder, args.shape, device=args.device, dtype=args.dtype)
            decode_steps(loaded, min(args.steps, 4), 16, 4, "torch")          # untimed warm-up
            # eager masked steps, eager kernel steps, captured steps (CUDA graphs where probed)
            paths = [decode_steps(loaded, args.steps, args.prompt_tokens, args.budget, k, g)
                     for k, g in (("torch", "off"), ("auto", "off"), ("auto", "auto"))]
        for r in paths:
            print(f"decode steps, kernels={r['kernels']} (kernel path: {r['decode_kernel']}, captured: {r['graphs']}): "
                  f"{r['tokens_per_s']:.0f} tok/s ({r['decode_tokens_per_s']:.0f} in steps), {r['step_ms']:.1f} ms/step "
                  f"(forward {r['step_forward_ms']:.1f}), weights-read floor {r['weights_read_floor_ms']:.2f} ms",
                  file=sys.stderr)
        print(json.dumps({"bench": "decode_steps", "shape": args.shape, "paths": paths}))
        return 0
    with tempfile.TemporaryDirectory() as folder:
        res = run(args.pairs, args.rounds, args.budget, folder, args.shape, args.device, args.dtype,
                  warmup=args.warmup, memory_gb=args.memory_gb, sample=args.sample, unsplit=args.unsplit,
                  check_every=args.check_every, no_hf=args.no_hf, no_vllm=args.no_vllm)
    for key in ("decoder_stats", "unsplit_decoder_stats")[: 2 if args.unsplit else 1]:
        s = res[key]
        print(f"{key.replace('_stats', '').replace('_', ' ')}: {s['steps']} steps, {s['prefills']} prefills, "
              f"{s['rows_peak']} rows at most, {s['sorts']} slot sorts, {s['seconds']:.2f}s in generate; decode "
              f"steps computed {s['scores_decoded'] / max(1, s['scores_decoded_own']):.2f}x their rows' own attention "
              "scores", file=sys.stderr)
    f = res["floor"]
    print(f"decode steps: {f['step_s']:.2f}s, forward {f['step_forward_s']:.2f}s, verdict reads after cues "
          f"{f['step_cue_reads_s']:.2f}s, other {f['step_other_s']:.2f}s "
          f"({100 * f['other_share_of_steps']:.0f}%); floor {f['floor_s']:.2f}s ({f['decoded_gflop']:.1f} GFLOP at "
          f"{f['matmul_gflop_per_s']:.0f} GFLOP/s)", file=sys.stderr)
    for r in res["rows"]:
        print(f"{r['method']:<64} {r['pairs_per_s']:7.3f} pairs/s {r['decoded_tokens_per_s']:8.0f} decoded tok/s "
              f"median {r['median_s']:.2f}s [{r['min_s']:.2f}, {r['max_s']:.2f}]", file=sys.stderr)
    print(json.dumps(res))
    return 0


# ------------------------------------------------------------------ pytest-benchmark form
try:
    import pytest
except ImportError:            # script use without pytest installed
    pytest = None

if pytest is not None:
    BENCH_PAIRS = int(os.environ.get("BENCH_PAIRS", "2"))
    BENCH_BUDGET = int(os.environ.get("BENCH_BUDGET", "16"))

    @pytest.fixture(scope="module")
    def workload(tmp_path_factory):
        from random_judge import load_random
        loaded = load_random(str(tmp_path_factory.mktemp("bench_decode_model")))
        return loaded, bank_pairs(loaded, BENCH_PAIRS)

    @pytest.mark.parametrize("naive", [True, False], ids=["hf_generate", "batched_decoder"])
    def test_generative_bank(benchmark, workload, naive):
        loaded, pairs = workload
        benchmark.extra_info["pairs"] = len(pairs)
        benchmark.pedantic(_run, args=(loaded, pairs, BENCH_BUDGET, naive), rounds=1, iterations=1)


if __name__ == "__main__":
    sys.exit(main())
