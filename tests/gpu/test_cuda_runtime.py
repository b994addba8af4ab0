"""The runtime on a CUDA device: what the CPU suite proves in fp32 on CPU, checked on the GPU.

Skipped without CUDA (the CPU suite covers the same code paths); `benchmarks/gpu_check.sh`
runs this file on a lent GPU. Every comparison is between two paths on the same device, or
against the fp32 CPU run as the reference:
  - prefix engine == naive forward, fp32 on CUDA (both archs, several batch compositions);
  - the same with every torch.empty poisoned to NaN, on a reward loop's group (rows whose
    pasts differ in length, in query slices): no unwritten column is read;
  - the same runs on CUDA and on CPU (fp32);
  - bf16 on CUDA: the engine's error against the fp32 reference is no worse than the naive
    path's (same dtype, same device) plus a small floor;
  - the Triton readout inside the engine equals the torch readout (fp32, compiled kernels);
  - the batched decoder equals HF `generate` token for token (fp32, greedy), also with decode steps in width groups and when bank-shaped
    prompts share a tree;
  - Judge on CUDA (the default bf16): swapping a and b negates the scores;
  - sliding-window, logit-mapped and MLA architectures (Mistral, mixed-layer Qwen3, Granite, Gemma 2,
    DeepSeek-V2):
    engine == naive, and the readout equals the model's own logits;
  - the load-time tree probe and the decoder probe: pass in bf16; MPT refused.
"""
from __future__ import annotations

import pytest
import torch

from baer_fast.runtime.config import EngineConfig
from baer_fast.runtime.open import load_judge
from baer_fast.bank.runner import RunReport, run_experts
from tests.fixtures.tiny_models import build_model_dir, make_pairs

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

CONFIGS = {"one_batch": EngineConfig(kernels="torch"),
           "batch_tokens_48": EngineConfig(batch_tokens=48, kernels="torch"),
           "tiny_budget": EngineConfig(memory_budget_bytes=1 << 16, batch_tokens=400, kernels="torch")}


@pytest.fixture(scope="module", params=["qwen3", "llama"])
def model_dir(request, tmp_path_factory):
    return build_model_dir(str(tmp_path_factory.mktemp(f"cuda_{request.param}")), arch=request.param,
                           seed=0 if request.param == "qwen3" else 1)


@pytest.fixture(scope="module")
def pairs():
    return make_pairs(7, seed=11)


def _runs(signals) -> list[float]:
    return [u for s in signals for name in sorted(s.experts) for u in s.experts[name]]


def _max_diff(x, y) -> float:
    a, b = _runs(x), _runs(y)
    assert len(a) == len(b)
    return max(abs(u - v) for u, v in zip(a, b))


def _tol(loaded, pairs, params) -> float:
    """2x the naive fp32 path's own error vs float64 (same device) for each of two fp32 paths."""
    from baer_fast import protocols
    from tests.fixtures.tolerances import naive_run_error, paths_tol
    return paths_tol(naive_run_error(loaded, pairs, protocols.SINGLE_PASS, derived_params=params))


def _signals(loaded, pairs, *, naive=False, config=EngineConfig(kernels="torch"), params=None):
    report = RunReport()
    out = run_experts(loaded, pairs, naive=naive, config=config, report=report, derived_params=params)
    return out, report


@pytest.mark.parametrize("config", CONFIGS.values(), ids=CONFIGS.keys())
def test_engine_equals_naive_fp32_on_cuda(model_dir, pairs, config):
    loaded = load_judge(model_dir, device="cuda", dtype="float32")
    naive, rep = _signals(loaded, pairs, naive=True)
    shared, _ = _signals(loaded, pairs, config=config, params=rep.derived_params)
    assert _max_diff(shared, naive) <= _tol(loaded, pairs, rep.derived_params)


@pytest.mark.parametrize("query_slice", [7, 256])
def test_no_unwritten_column_is_read_on_cuda(model_dir, poisoned_empty, monkeypatch, query_slice):
    from tests.fixtures.tiny_models import completion_pairs
    monkeypatch.setattr("baer_fast.runtime.plan.chunks.QUERY_SLICE", query_slice)
    loaded = load_judge(model_dir, device="cuda", dtype="float32")
    group = completion_pairs(loaded.tokenizer, 60, (40, 90, 15, 120))
    naive, rep = _signals(loaded, group, naive=True)
    shared, _ = _signals(loaded, group, params=rep.derived_params)
    assert _max_diff(shared, naive) <= _tol(loaded, group, rep.derived_params)


def test_cuda_equals_cpu_fp32(model_dir, pairs):
    on_cpu, on_gpu = (load_judge(model_dir, device=d, dtype="float32") for d in ("cpu", "cuda"))
    cpu, rep = _signals(on_cpu, pairs)
    gpu, _ = _signals(on_gpu, pairs, params=rep.derived_params)
    # each device's fp32 path within 2x its own naive error vs float64 (paths_tol of the larger)
    assert _max_diff(gpu, cpu) <= max(_tol(m, pairs, rep.derived_params) for m in (on_cpu, on_gpu))


def test_bf16_engine_error_no_worse_than_naive(model_dir, pairs):
    ref, rep = _signals(load_judge(model_dir, device="cpu", dtype="float32"), pairs)
    bf16 = load_judge(model_dir, device="cuda", dtype="bfloat16")
    naive, _ = _signals(bf16, pairs, naive=True, params=rep.derived_params)
    shared, _ = _signals(bf16, pairs, params=rep.derived_params)
    err_naive, err_shared = _max_diff(naive, ref), _max_diff(shared, ref)
    print(f"bf16 max |du| vs fp32 CPU: naive {err_naive:.3g}, engine {err_shared:.3g}")
    assert err_shared <= 2 * err_naive + 1e-3


def test_triton_readout_inside_engine(model_dir, pairs):
    pytest.importorskip("triton")
    from baer_fast.kernels.dispatch import HAS_TRITON_GPU
    if not HAS_TRITON_GPU:
        pytest.skip("Triton cannot compile for this GPU")
    loaded = load_judge(model_dir, device="cuda", dtype="float32")
    torch_runs, rep = _signals(loaded, pairs, config=EngineConfig(kernels="torch"))
    triton_runs, _ = _signals(loaded, pairs, config=EngineConfig(kernels="triton"), params=rep.derived_params)
    assert _max_diff(triton_runs, torch_runs) <= _tol(loaded, pairs, rep.derived_params)


@pytest.mark.parametrize("group_columns", [None, 0])
def test_decoder_greedy_equals_generate_on_cuda(model_dir, group_columns):
    """Also with every decode step split into width groups wherever a column is saved (0)."""
    from baer_fast.runtime.decode import Decoder, GenRequest
    from tests.fixtures.prompts import random_prompts
    loaded = load_judge(model_dir, device="cuda", dtype="float32")
    prompts = random_prompts(loaded, 8, seed=1)
    budgets = [16, 3, 16, 1, 12, 16, 7, 10]
    dec = Decoder(loaded, max_rows=3, group_columns=group_columns)
    got = dec.generate([GenRequest(p, b) for p, b in zip(prompts, budgets)])
    for p, b, res in zip(prompts, budgets, got):
        ids = torch.tensor([p], device="cuda")
        want = loaded.model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=b,
                                     do_sample=False)[0, len(p):].tolist()
        assert list(res.tokens[0]) == want


def test_decoder_tree_prefill_equals_generate_on_cuda(model_dir):
    """Bank-shaped prompts entering together: every tree node prefilled once (scattered slots,
    per-level KV copies on the device), tokens equal `generate` on each prompt alone."""
    from baer_fast.runtime.decode import Decoder, GenRequest
    from tests.fixtures.prompts import bank_tree_prompts
    from tests.runtime.test_counts import distinct_prefixes
    loaded = load_judge(model_dir, device="cuda", dtype="float32")
    prompts = bank_tree_prompts(loaded)
    dec = Decoder(loaded)
    got = dec.generate([GenRequest(p, 8) for p in prompts])
    for p, res in zip(prompts, got):
        ids = torch.tensor([p], device="cuda")
        want = loaded.model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=8,
                                     do_sample=False)[0, len(p):].tolist()
        assert list(res.tokens[0]) == want
    assert dec.stats.tokens_prefilled == distinct_prefixes(prompts)


def test_judge_on_cuda_is_antisymmetric(tmp_path):
    from baer_fast import artifact
    from baer_fast.api import Judge
    from baer_fast.selection.fit import fit_condition
    from tests.fixtures.data import synthetic_pairs

    path = build_model_dir(str(tmp_path / "judge"), arch="qwen3", seed=1, max_pos=512)
    report = RunReport()
    signals = run_experts(load_judge(path, device="cpu"), synthetic_pairs(30), report=report)
    art = fit_condition(signals, condition="tiny-qwen3")
    art["derived_params"] = report.derived_params
    artifact.save(str(tmp_path / "head.json"), art)
    judge = Judge.from_pretrained(path, head=str(tmp_path / "head.json"), device="cuda")   # bf16
    pairs = synthetic_pairs(24, seed=5)
    q, a, b = ([p.question for p in pairs], [p.response_a for p in pairs], [p.response_b for p in pairs])
    n = len(pairs)
    both = judge.score(q + q, a + b, b + a)                   # each pair and its swap in one call
    s, s_swapped = judge.score(q, a, b), judge.score(q, b, a)
    print(f"cuda bf16 Judge: max |s + s_swapped| in one call {torch.max(torch.abs(both[:n] + both[n:])).item():.3g}, "
          f"across two calls {torch.max(torch.abs(s + s_swapped)).item():.3g}")
    # In one call a pair and its swap are one computation (bank/canonical.py), mirrored: bit for bit,
    # but for the float64 head's rounding. Two calls run the same contents again, and on CUDA that rerun
    # did not give the same bits (an H200, 2026-12-04: one pair of 24 moved by 1.0e-5; cause not
    # isolated), so only the one-call mirror is asserted exact here.
    from tests.fixtures.tolerances import HEAD_OPS, fp64_tol
    assert torch.max(torch.abs(both[:n] + both[n:])) <= fp64_tol(HEAD_OPS, 1 + float(both.abs().max()))


OTHER_ARCHS = {   # sliding-window layers (all, mixed), logits changed after the LM head (scale, soft-cap), MLA
    "mistral-sliding": dict(arch="mistral", sliding_window=24),
    "qwen3-mixed-sliding": dict(arch="qwen3", use_sliding_window=True, sliding_window=24, max_window_layers=1),
    "granite-scaled": dict(arch="granite", logits_scaling=4.0),
    "gemma2-capped": dict(arch="gemma2", final_logit_softcapping=2.0, attn_logit_softcapping=5.0,
                          sliding_window=24, query_pre_attn_scalar=16),
    "deepseek-v2-mla": dict(arch="deepseek_v2", kv_heads=4, moe_intermediate_size=32, n_routed_experts=4,
                            num_experts_per_tok=2, n_shared_experts=1, first_k_dense_replace=1, kv_lora_rank=16,
                            q_lora_rank=None, qk_rope_head_dim=8, qk_nope_head_dim=16, v_head_dim=12),
}


@pytest.mark.parametrize("name", sorted(OTHER_ARCHS))
def test_other_architectures_on_cuda(name, tmp_path, pairs):
    """Engine == naive (fp32, CUDA, Triton readout where it compiles), and the constrained readout
    equals the model's own logits."""
    from baer_fast.kernels.dispatch import HAS_TRITON_GPU
    from baer_fast.runtime.model.readout import read_model
    loaded = load_judge(build_model_dir(str(tmp_path / name), seed=9, **OTHER_ARCHS[name]), device="cuda",
                        dtype="float32")
    kernels = "triton" if HAS_TRITON_GPU else "torch"
    from tests.fixtures.tolerances import as_float64, assert_engine_matches_naive, forward_tol, paths_tol
    assert_engine_matches_naive(loaded, pairs, config=EngineConfig(kernels=kernels))
    ids, choices = torch.arange(40, 100, device="cuda")[None], torch.tensor([3, 7, 11], device="cuda")
    with torch.inference_mode():
        theirs = torch.log_softmax(loaded.model(input_ids=ids, use_cache=False).logits[0, -1].float()[choices], -1)
        ours = read_model(loaded, loaded.hidden(ids)[0, -1:], choices, kernels=kernels)[0]
        try:        # the model's own fp32 error vs float64; the stated bound where no float64 kernel runs (MoE)
            exact = torch.log_softmax(as_float64(loaded).model(input_ids=ids, use_cache=False).logits[0, -1][choices], -1)
            tol = paths_tol(float((theirs.double() - exact).abs().max()), float(exact.abs().max()))
        except RuntimeError:
            tol = forward_tol(loaded, pairs)
    assert torch.allclose(ours, theirs, atol=tol, rtol=0)


@pytest.mark.slow
def test_bf16_drift_at_the_8b_shape(tmp_path):
    """At a real judge's shape (Qwen3-8B, random weights), the prefix engine's bf16 log-probs
    drift from the fp32 ones (same weights) no more than the naive path's do."""
    import dataclasses
    import os
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                    "benchmarks"))
    from bench_engine import anchor_groups
    from random_judge import load_random

    from baer_fast.runtime.prefill import PrefixEngine
    from baer_fast.runtime.model.load import _kv_bytes_per_token
    from baer_fast.runtime.naive import NaiveEngine

    fp32 = load_random(str(tmp_path), "qwen3-8b", device="cuda", dtype="float32")
    groups = anchor_groups(fp32, 2)
    ref = NaiveEngine(fp32, kernels="torch").run(groups).logprobs
    bf16 = dataclasses.replace(fp32, model=fp32.model.to(torch.bfloat16))
    bf16 = dataclasses.replace(bf16, kv_bytes_per_token=_kv_bytes_per_token(bf16.model))
    naive = NaiveEngine(bf16, kernels="torch").run(groups).logprobs
    shared = PrefixEngine(bf16, EngineConfig(memory_budget_bytes=16 << 30, kernels="torch")).run(groups).logprobs

    def drift(got):
        return max(abs(x - y) for gg, gr in zip(got, ref) for qg, qr in zip(gg, gr) for x, y in zip(qg, qr))
    d_naive, d_shared = drift(naive), drift(shared)
    print(f"8B shape, bf16 vs fp32 max |d logprob|: naive {d_naive:.3g}, engine {d_shared:.3g}")
    assert d_shared <= 2 * d_naive + 1e-2


def test_tree_probe_on_cuda(tmp_path):
    """The load-time tree probe on CUDA: a judge that runs passes it, and the decoder probe, in
    bf16 (no refusal for rounding); MPT (ALiBi from the sequence layout) is refused in fp32."""
    from baer_fast.runtime.model.load import ModelError
    from baer_fast.runtime.probes import check_decoder, check_tree_path
    ok = load_judge(build_model_dir(str(tmp_path / "qwen3"), arch="qwen3", seed=11), device="cuda", dtype="bfloat16")
    assert check_tree_path(ok) < 0.1 and check_decoder(ok)["ok"]
    with pytest.raises(ModelError, match="does not honour"):
        load_judge(build_model_dir(str(tmp_path / "mpt"), arch="mpt", seed=11), device="cuda", dtype="float32")
