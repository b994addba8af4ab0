"""The decoder's decode steps through the decode-attention kernel (runtime/decode_kernel.py),
run here under the Triton interpreter with the CUDA-only gate opened: its load-time probe passes
and its greedy tokens are HF generate's, prompts of different lengths in one batch."""
import pytest

from baer_fast.runtime import decode_kernel
from baer_fast.runtime.decode import Decoder, GenRequest
from tests.fixtures.checks import hf_greedy
from tests.fixtures.tiny_models import build_model_dir


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from baer_fast.runtime.open import load_judge
    return load_judge(build_model_dir(str(tmp_path_factory.mktemp("dk")), arch="qwen3", seed=0))


@pytest.mark.slow    # the interpreter runs every layer's attention of every step: ~80 s
def test_kernel_steps_equal_generate(tiny, monkeypatch, device):
    if device.type == "cuda":
        tiny.model.to("cuda")
    else:
        monkeypatch.setattr(decode_kernel, "usable", lambda loaded, kernels: True)   # the gate: CUDA only
    calls = []
    real = decode_kernel.attention
    monkeypatch.setattr(decode_kernel, "attention", lambda *a, **k: calls.append(1) or real(*a, **k))
    dec = Decoder(tiny, kernels="triton")
    assert dec._kernel and calls                     # the probe ran through the kernel and passed
    prompts = [tuple(range(5, 5 + n)) for n in (3, 17, 9)]
    got = dec.generate([GenRequest(p, 5) for p in prompts])
    for p, res in zip(prompts, got):
        assert list(res.tokens[0]) == hf_greedy(tiny, p, 5)
