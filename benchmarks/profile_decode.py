"""Where a decode step's device time goes: the batched decoder's eager step vs HF's own forward.

For the GPU target of bench_decode --steps (an 8B shape, 64 rows): runs `--rows` greedy rows of
`--prompt-tokens` through decode.Decoder (graphs off, so every kernel shows in the profile) and,
on the same model, HF's plain forward over a DynamicCache with the same rows and lengths. Prints
each one's top kernels by device time (torch.profiler), then one JSON line with the step times
(CUDA events). Never asserts.

    python benchmarks/profile_decode.py --shape qwen3-8b --device cuda --dtype bfloat16
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.append(os.path.join(HERE, ".."))
sys.path.insert(0, HERE)


def _profile(fn, label: str, top: int):
    import torch
    from torch.profiler import ProfilerActivity, profile
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    with profile(activities=acts) as prof:
        fn()
    key = "self_cuda_time_total" if torch.cuda.is_available() else "self_cpu_time_total"
    print(f"== {label}", file=sys.stderr)
    print(prof.key_averages().table(sort_by=key, row_limit=top, max_name_column_width=70), file=sys.stderr)


def _sync(dev):
    import torch
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def hf_steps(loaded, rows: int, prompt_tokens: int, steps: int) -> float:
    """Seconds per step of HF's own forward (DynamicCache) decoding `rows` rows after their prompts."""
    import torch
    from transformers import DynamicCache
    dev, m = loaded.device, loaded.model
    vocab = m.get_input_embeddings().num_embeddings
    ids = torch.tensor([[(r * 7919 + i * 31) % (vocab - 10) + 10 for i in range(prompt_tokens)] for r in range(rows)],
                       device=dev)
    with torch.inference_mode():
        cache = DynamicCache()
        kw = {loaded.cache_arg: cache, "use_cache": True}
        out = m(input_ids=ids, **kw)
        tok = out.logits[:, -1].argmax(-1, keepdim=True)
        _sync(dev)
        t0 = time.perf_counter()
        for _ in range(steps):
            out = m(input_ids=tok, logits_to_keep=1, **kw)
            tok = out.logits[:, -1].argmax(-1, keepdim=True)
        _sync(dev)
    return (time.perf_counter() - t0) / steps


VARIANTS = [dict(dot=False, block_n=64, split=256, num_warps=4), dict(dot=False, block_n=16, split=256, num_warps=4),
            dict(dot=False, block_n=8, split=256, num_warps=4), dict(dot=False, block_n=16, split=64, num_warps=4),
            dict(dot=False, block_n=8, split=64, num_warps=2), dict(dot=False, block_n=16, split=128, num_warps=2),
            dict(dot=False, block_n=8, split=32, num_warps=1), dict(dot=True, block_n=32, split=256, num_warps=4),
            dict(dot=True, block_n=64, split=256, num_warps=4), dict(dot=True, block_n=64, split=128, num_warps=4),
            dict(dot=True, block_n=32, split=64, num_warps=4), dict(dot=True, block_n=64, split=64, num_warps=2)]


def attention_variants(loaded, rows: int, widths=(576, 4160)) -> list[dict]:
    """The decode-attention kernel's launch variants at the model's head shape, `rows` rows
    nearly full: microseconds per call (triton.testing.do_bench) and largest error against
    float64, beside the masked SDPA path; `bound` is the probe's (runtime/decode_kernel.py)."""
    import torch
    from triton.testing import do_bench

    from baer_fast.kernels.decode_attention import decode_attention
    from baer_fast.runtime.decode_kernel import masked_sdpa, sdpa_reference
    cfg, dev, dt = loaded.model.config, loaded.device, loaded.dtype
    hq, hkv, d = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
    out = []
    for w in widths:
        q = torch.randn(rows, hq, d, device=dev, dtype=dt)
        k, v = (torch.randn(rows, hkv, w, d, device=dev, dtype=dt) for _ in range(2))
        slots, lengths = torch.arange(rows, device=dev), torch.full((rows,), w - 1, device=dev)
        scale = d ** -0.5
        exact, sdpa_err, bound = sdpa_reference(q, k, v, slots, lengths, scale=scale)
        sdpa = do_bench(lambda: masked_sdpa(q, k, v, slots, lengths, scale=scale))
        row = {"width": w, "sdpa_masked_us": 1e3 * sdpa, "sdpa_err": sdpa_err, "bound": bound, "variants": []}
        for var in VARIANTS:
            try:
                got = decode_attention(q, k, v, slots, lengths, scale=scale, **var)
                ms = do_bench(lambda: decode_attention(q, k, v, slots, lengths, scale=scale, **var))
            except Exception as exc:                    # a variant that does not compile here
                row["variants"].append({**var, "error": f"{type(exc).__name__}: {str(exc)[:200]}"})
                continue
            row["variants"].append({**var, "us": 1e3 * ms, "err": (got.double() - exact).abs().max().item()})
        out.append(row)
        print(json.dumps(row), file=sys.stderr)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=64)
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--budget", type=int, default=8)
    ap.add_argument("--kernels", default="auto")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--no-profile", action="store_true", help="skip the two profiles")
    ap.add_argument("--variants", action="store_true",
                    help="also: the decode-attention kernel's launch variants, and captured steps with tl.dot")
    from random_judge import add_model_arguments, load_random
    add_model_arguments(ap)
    args = ap.parse_args(argv)
    from bench_decode import decode_steps
    with tempfile.TemporaryDirectory() as folder:
        loaded = load_random(folder, args.shape, device=args.device, dtype=args.dtype)
        decode_steps(loaded, min(args.rows, 4), 16, 4, "torch")                  # warm-up
        ours = decode_steps(loaded, args.rows, args.prompt_tokens, args.budget, args.kernels, "off")
        if not args.no_profile:
            _profile(lambda: decode_steps(loaded, args.rows, args.prompt_tokens, args.budget, args.kernels, "off"),
                     "decoder, eager steps (prefill included)", args.top)
        hf = hf_steps(loaded, args.rows, args.prompt_tokens, 3)
        extra = {}
        if args.variants:
            from baer_fast.kernels import decode_attention as da
            extra["attention"] = attention_variants(loaded, args.rows)
            # captured steps with the sums launch, the default launch and the fastest variant over
            # both widths among those within the probe's bound at both
            ok = [i for i in range(len(VARIANTS)) if all("us" in r["variants"][i] and r["variants"][i]["err"]
                                                           <= r["bound"] for r in extra["attention"])]
            best = min(ok, key=lambda i: sum(r["variants"][i]["us"] for r in extra["attention"]))
            keep = dict(da.LAUNCH)
            for name, var in (("sums", VARIANTS[0]), ("default", da.launch_defaults(loaded.dtype)),
                              ("fastest", VARIANTS[best])):
                da.LAUNCH = {"half": var, "fp32": var}
                r = decode_steps(loaded, args.rows, args.prompt_tokens, 32, args.kernels, "auto")
                extra[f"captured_{name}"] = {"launch": var, **{k: r[k] for k in ("graphs", "decode_kernel", "step_ms",
                                                                               "decode_tokens_per_s", "tokens_per_s")}}
                print(json.dumps(extra[f"captured_{name}"]), file=sys.stderr)
            da.LAUNCH = keep
            r = decode_steps(loaded, args.rows, args.prompt_tokens, 32, "torch", "auto")
            extra["captured_masked"] = {k: r[k] for k in ("graphs", "decode_kernel", "step_ms", "decode_tokens_per_s")}
            print(json.dumps(extra["captured_masked"]), file=sys.stderr)
    print(json.dumps({"bench": "profile_decode", "shape": args.shape, "rows": args.rows,
                      "decoder_step_ms": ours["step_ms"], "decoder_forward_ms": ours["step_forward_ms"],
                      "hf_step_ms": 1e3 * hf, "weights_read_floor_ms": ours["weights_read_floor_ms"], **extra}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
