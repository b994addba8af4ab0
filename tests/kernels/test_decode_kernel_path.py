"""The decoder's decode steps through the decode-attention kernel (runtime/decode_kernel.py),
run here under the Triton interpreter with the CUDA-only gate opened: its load-time probe passes
(and fails for a kernel that misreads), and its greedy tokens are HF generate's, prompts of
different lengths in one batch."""
import logging

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
    assert dec._kernel                               # the probe passed
    prompts = [tuple(range(5, 5 + n)) for n in (3, 17, 9)]
    got = dec.generate([GenRequest(p, 5) for p in prompts])
    assert calls                                     # the steps ran through the kernel
    for p, res in zip(prompts, got):
        assert list(res.tokens[0]) == hf_greedy(tiny, p, 5)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_probe_passes_the_kernel_and_refuses_one_that_misreads(tmp_path, monkeypatch, dtype, caplog):
    """The probe at the model's head shape and dtype (the interpreter: fp32, and fp16 through the
    tensor-core launch). A kernel that reads one column past a row's length (NaN there) fails it,
    and so does one off by a relative 1e-2: the decoder then takes the masked path, saying why."""
    from baer_fast.kernels import dispatch
    from baer_fast.runtime.open import load_judge
    loaded = load_judge(build_model_dir(str(tmp_path), arch="qwen3", seed=0), dtype=dtype)
    monkeypatch.setattr(decode_kernel, "usable", lambda loaded, kernels: True)
    assert decode_kernel.probe(loaded, "triton")
    real = dispatch.decode_attention
    for broken in (lambda q, k, v, s, n, **kw: real(q, k, v, s, n + 1, **kw),
                   lambda *a, **kw: real(*a, **kw) * 1.01):
        monkeypatch.setattr(dispatch, "decode_attention", broken)
        with caplog.at_level(logging.WARNING, logger="baer_fast"):
            assert not decode_kernel.probe(loaded, "triton")
            assert not Decoder(loaded, kernels="triton", graphs="off")._kernel
        assert "without the decode-attention kernel" in caplog.text
        caplog.clear()
