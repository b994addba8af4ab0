"""Decode steps replayed from CUDA graphs (runtime/decode_graphs.py) on a CUDA device, fp32.

Skipped without CUDA (tests/runtime/test_decode_blocks.py runs the same plumbing on CPU with a
stand-in for the capture); `benchmarks/gpu_check.sh` runs this file on a lent GPU. The load-time
probe must pass on a plain Qwen3/Llama model, and the captured steps must give the eager steps'
tokens (greedy rows ending at different steps, few slots so buckets change, sampled rows), through
the masked path and through the decode-attention kernel.
"""
from __future__ import annotations

import pytest
import torch

from baer_fast.runtime.decode import Decoder, GenRequest
from baer_fast.runtime.open import load_judge
from tests.fixtures.prompts import random_prompts
from tests.fixtures.tiny_models import build_model_dir

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


@pytest.fixture(scope="module", params=["qwen3", "llama"])
def loaded(request, tmp_path_factory):
    folder = build_model_dir(str(tmp_path_factory.mktemp(f"graphs_{request.param}")), arch=request.param,
                             seed=0 if request.param == "qwen3" else 1)
    return load_judge(folder, device="cuda", dtype="float32")


@pytest.mark.parametrize("kernels", ["torch", "auto"])
def test_captured_steps_give_the_eager_tokens(loaded, kernels):
    prompts = random_prompts(loaded, 7, seed=3)
    reqs = [GenRequest(p, b) for p, b in zip(prompts[:6], [16, 3, 16, 1, 12, 9])]
    reqs.append(GenRequest(prompts[6], 10, samples=3, temperature=0.9, top_p=0.9, seeds=(1, 2, 3)))
    captured = Decoder(loaded, max_rows=5, kernels=kernels)
    assert captured.graphs, "the CUDA-graph probe failed on this device (see the log line)"
    eager = Decoder(loaded, max_rows=5, kernels=kernels, graphs="off")
    assert [r.tokens for r in captured.generate(reqs)] == [r.tokens for r in eager.generate(reqs)]
    assert captured.stats.blocks < captured.stats.steps          # ids read once per block
