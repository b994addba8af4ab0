"""The Judge's inputs and load options: anything but a string (or, for a question, a
conversation) is an InputError naming the argument and index, never judged as its repr; load
options fail at load with errors that name the option and its choices."""
from __future__ import annotations

import pathlib

import pytest
import torch

from baer_fast.api import Judge, JudgeOptions
from baer_fast.errors import ArtifactError, BaerError, InputError

TURNS = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}, {"role": "user", "content": "so?"}]


@pytest.mark.parametrize("args, field", [
    ((["q"], [b"4"], ["4"]), "responses_a[0]"),
    ((["q"], ["4"], [None]), "responses_b[0]"),
    ((["q", 5], ["a", "b"], ["c", "d"]), "questions[1]"),
    (("qq", "ab", "cd"), "questions"),
    ((["q"], "a", ["b"]), "responses_a"),
    ((["q"], 4, ["b"]), "responses_a"),
    (([TURNS[1:]], ["a"], ["b"]), "questions[0]"),
])
def test_a_bad_entry_is_an_input_error_naming_it(default_judge, args, field):
    with pytest.raises(InputError) as err:
        default_judge.score(*args)
    assert err.value.field == field


def test_conversations_and_any_sequence_are_accepted(default_judge):
    s = default_judge.score([TURNS, "q"], ("a", "b"), iter(["b", "a"]))
    as_tuples = default_judge.score([tuple((m["role"], m["content"]) for m in TURNS), "q"], ["a", "b"], ["b", "a"])
    assert s.shape == (2,) and torch.equal(s, as_tuples)


def test_without_truncate_the_error_speaks_to_a_python_caller(default_judge):
    strict = Judge(default_judge.engine, default_judge.art, options=JudgeOptions(truncate=False))
    with pytest.raises(InputError, match=r"truncate=True") as err:
        strict.score(["q", "q"], ["a", "word " * 3000], ["b", "b"])
    assert "--truncate" not in str(err.value)
    # the pair as the caller knows it (its index), not an id the Judge made up; no one field is to blame
    assert str(err.value).startswith("pair 1 (0-based) of the call: ") and err.value.field is None


def test_from_pretrained_takes_paths_and_torch_dtypes(judge_dir, head_path, judge):
    j = Judge.from_pretrained(pathlib.Path(judge_dir), head=pathlib.Path(head_path), kernels="torch",
                              dtype=torch.float32)
    assert j.art["checksum"] == judge.art["checksum"] and j.options.dtype == "float32"
    assert torch.equal(j.score(["q"], ["a"], ["b"]), judge.score(["q"], ["a"], ["b"]))


@pytest.mark.parametrize("kw, error, needle", [
    ({"dtype": "float17"}, InputError, "choose from auto, float32"),
    ({"dtype": torch.int8}, InputError, "field 'dtype'"),
    ({"head": {}}, ArtifactError, "field 'head': missing"),
    ({"head": {"head": "mean", "experts": ["direct"]}}, ArtifactError, "field 'heads': missing"),
    ({"head": {"head": "mean", "heads": {}, "experts": ["direct"]}}, ArtifactError, "no parameters in 'heads'"),
    ({"head": 3}, InputError, "field 'head'"),
    ({"kernels": "cuda"}, BaerError, "auto, triton, torch"),
])
def test_bad_load_options_name_the_option(judge_dir, kw, error, needle):
    with pytest.raises(error, match=needle):
        Judge.from_pretrained(judge_dir, **kw)


def test_triton_kernels_without_a_gpu_fail_at_load(judge_dir, monkeypatch):
    from baer_fast.kernels import dispatch
    if dispatch.HAS_TRITON_GPU:
        pytest.skip("Triton runs here")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(dispatch.KernelUnavailableError, match="needs a CUDA device"):
        Judge.from_pretrained(judge_dir, kernels="triton")


def test_from_pretrained_sets_the_generation_budgets_and_seed(judge_dir):
    """The docs pointed Python users at JudgeOptions(generation=...), which from_pretrained did not take."""
    from baer_fast.bank.generative import GenerationConfig
    gen = GenerationConfig(max_new_tokens={"cot": 8}, seed=3)
    j = Judge.from_pretrained(judge_dir, kernels="torch", generation=gen)
    assert j.options.generation is gen


def test_memory_gb_is_one_budget_for_the_engine_and_the_decoder_as_on_the_command_line(judge_dir, monkeypatch):
    """--memory-gb bounds the engine's KV/activations and the decoder's slots; Judge.from_pretrained took
    no memory option at all (the engine stayed at 2 GiB, the decoder at its own 4 GiB)."""
    from baer_fast.artifact import default_artifact
    from baer_fast.bank.generative import GenerationConfig
    from baer_fast.runtime import decode
    from baer_fast.runtime.config import EngineConfig
    made, gib = [], 2**30

    class Recorded(decode.Decoder):
        def __init__(self, *args, **kw):
            made.append(kw)
            super().__init__(*args, **kw)
    monkeypatch.setattr(decode, "Decoder", Recorded)
    with_cot = {**default_artifact(), "experts": ["direct", "score", "cot"]}      # the default head, cot run beside
    j = Judge.from_pretrained(judge_dir, head=with_cot, kernels="torch", memory_gb=0.25,
                              generation=GenerationConfig(max_new_tokens={"cot": 2}, seed=3))
    assert j.engine.config.memory_budget_bytes == gib // 4
    j.score(["q?"], ["a"], ["b"])
    assert made and all(kw["memory_budget_bytes"] == gib // 4 for kw in made)
    # a generation config passed in keeps its budgets and seed; memory_gb sets its memory, as --memory-gb does
    assert (j.options.generation.max_new_tokens, j.options.generation.seed) == ({"cot": 2}, 3)
    # the default is the command line's: EngineConfig's default budget, for both
    d = Judge.from_pretrained(judge_dir, head=with_cot, kernels="torch")
    assert d.engine.config.memory_budget_bytes == EngineConfig().memory_budget_bytes
    assert d.options.generation.memory_budget_bytes == EngineConfig().memory_budget_bytes
    for bad in (0, -1, "2", True):
        with pytest.raises(InputError, match="memory_gb"):
            Judge.from_pretrained(judge_dir, kernels="torch", memory_gb=bad)
    from baer_fast.runtime.vllm import backend as vllm_backend
    monkeypatch.setattr(vllm_backend, "require_vllm", lambda: None)
    with pytest.raises(BaerError, match="gpu_memory_utilization"):           # vLLM sizes its own KV cache
        Judge.from_pretrained(judge_dir, backend="vllm", memory_gb=1)
