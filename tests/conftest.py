"""The suite's one conftest: settings, and every tiny judge model the tests share.

Under CI (CI=true) hypothesis runs derandomized, so a green run is reproducible and a red one
names the same failing example on a rerun; locally it explores. The tiny models (random
seeded weights, locally trained tokenizers, `tests/fixtures/tiny_models.build_model_dir`) are
built once per session in tmp dirs and loaded through the same `--model PATH` code path as
real models. Inputs that need no model live in `tests/fixtures/` (data.py, prompts.py).
The Triton interpreter switch stays in tests/kernels/conftest.py (it must not reach other tests).
"""
import os

import pytest
from hypothesis import settings

from tests.fixtures.tiny_models import build_model_dir

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


@pytest.fixture
def poisoned_empty(monkeypatch):
    """Every torch.empty float tensor starts as NaN, so reading a column nobody wrote shows up.
    Masked columns still enter attention (score + dtype-min, weight x value): uninitialised memory
    there is a bug whose symptom, NaN verdicts, depends on what the allocator hands back."""
    import torch
    empty = torch.empty

    def nan_empty(*args, **kwargs):
        t = empty(*args, **kwargs)
        return t.fill_(float("nan")) if t.is_floating_point() else t
    monkeypatch.setattr(torch, "empty", nan_empty)


@pytest.fixture
def refused_width_groups(monkeypatch):
    """The width-group attention raises, as under remote code that picks its attention classes
    by name and knows none of ours (the engine and the decoder must fall back to one width)."""
    from baer_fast.runtime.plan import width_groups

    def refuse(*args, **kwargs):
        raise KeyError(f"{width_groups.NAME} is not an attention class of this model")
    monkeypatch.setattr(width_groups, "attention", refuse)


# ---------------------------------------------------------------- tiny judge models


@pytest.fixture(scope="session")
def qwen_dir(tmp_path_factory):
    return build_model_dir(str(tmp_path_factory.mktemp("qwen3")), arch="qwen3")


@pytest.fixture(scope="session")
def llama_dir(tmp_path_factory):
    return build_model_dir(str(tmp_path_factory.mktemp("llama")), arch="llama", seed=1)


@pytest.fixture(scope="session")
def digits_dir(tmp_path_factory):
    """Qwen-like digit-splitting tokenizer: "10" is two tokens, "1".."9" one each."""
    return build_model_dir(str(tmp_path_factory.mktemp("qwen3_digits")), arch="qwen3", split_digits=True, seed=2)


@pytest.fixture(scope="session")
def short_ctx_dir(tmp_path_factory):
    return build_model_dir(str(tmp_path_factory.mktemp("llama_short")), arch="llama", max_pos=128, seed=3)


@pytest.fixture(scope="session", params=["qwen3", "llama"])
def model_dir(request, qwen_dir, llama_dir):
    return qwen_dir if request.param == "qwen3" else llama_dir


@pytest.fixture(scope="session")
def loaded_models():
    cache = {}

    def get(path):
        from baer_fast.runtime.open import load_judge
        if path not in cache:
            cache[path] = load_judge(path)
        return cache[path]
    return get


@pytest.fixture
def loaded(model_dir, loaded_models):
    return loaded_models(model_dir)


@pytest.fixture(scope="session")
def gen_models(tmp_path_factory):
    """The generative tests' models (fp32); these random models rarely emit EOS, so every test
    uses small budgets (4-16 tokens)."""
    cache = {}

    def get(arch: str):
        from baer_fast.runtime.open import load_judge
        if arch not in cache:
            path = build_model_dir(str(tmp_path_factory.mktemp(f"gen_{arch}")), arch=arch,
                                   seed=0 if arch == "qwen3" else 1)
            cache[arch] = (path, load_judge(path))
        return cache[arch]
    return get


@pytest.fixture(scope="session")
def qwen(gen_models):
    return gen_models("qwen3")[1]


@pytest.fixture(scope="session")
def qwen_path(gen_models):
    return gen_models("qwen3")[0]


@pytest.fixture(scope="session")
def hd64_model_dir(tmp_path_factory):
    """The tiny model the vLLM tests share (vLLM's CPU attention needs head_dim >= 64)."""
    return build_model_dir(str(tmp_path_factory.mktemp("qwen3_hd64")), arch="qwen3", layers=2, hidden=128,
                           heads=2, kv_heads=1, head_dim=64, intermediate=256, max_pos=2048, seed=5)


@pytest.fixture(scope="session")
def judge_dir(tmp_path_factory):
    return build_model_dir(str(tmp_path_factory.mktemp("judge")), arch="qwen3", seed=1, max_pos=512)


@pytest.fixture(scope="session")
def head_path(judge_dir, tmp_path_factory):
    """Single-pass bank on 30 labelled synthetic pairs -> stack head with frozen derived params."""
    from baer_fast import artifact
    from baer_fast.bank.runner import RunReport, run_experts
    from baer_fast.selection.fit import fit_condition
    from tests.fixtures.data import synthetic_pairs

    report = RunReport()
    signals = run_experts(judge_dir, synthetic_pairs(30), report=report)
    art = fit_condition(signals, condition="tiny-qwen3")
    art["derived_params"] = report.derived_params
    path = str(tmp_path_factory.mktemp("head") / "head.json")
    artifact.save(path, art)
    return path


@pytest.fixture(scope="session")
def judge(judge_dir, head_path):
    from baer_fast.api import Judge
    return Judge.from_pretrained(judge_dir, head=head_path, kernels="torch")


@pytest.fixture(scope="session")
def default_judge(judge_dir):
    """The same model with no head: the label-free default head (heads/default.py)."""
    from baer_fast.api import Judge
    return Judge.from_pretrained(judge_dir, kernels="torch")


# ---------------------------------------------------------------- no model


@pytest.fixture
def cli(capsys):
    """Run the CLI in-process; returns (exit_code, stdout, stderr)."""
    from baer_fast.cli import main

    def run(*argv):
        code = main([str(a) for a in argv])
        cap = capsys.readouterr()
        return code, cap.out, cap.err
    return run


@pytest.fixture(scope="session")
def llmbar(tmp_path_factory) -> dict:
    """{'signals', 'head', 'scores'} paths for the GPT-4 condition of the shipped LLMBar sample."""
    from baer_fast import artifact
    from baer_fast.commands.demo import sample_dir
    from baer_fast.io.adapters import load
    from baer_fast.io.jsonl import write_jsonl
    from baer_fast.io.records import write_signals
    from baer_fast.scoring import score_records
    from baer_fast.selection.fit import fit_condition

    d = tmp_path_factory.mktemp("llmbar")
    signals = load("llmbar", sample_dir()).banks["GPT-4"]
    paths = {"signals": str(d / "signals.GPT-4.jsonl"), "head": str(d / "head.json"),
             "scores": str(d / "scores.jsonl"), "dir": str(d)}
    write_signals(paths["signals"], signals)
    art = fit_condition(signals, condition="GPT-4")
    artifact.save(paths["head"], art)
    write_jsonl(paths["scores"], score_records(artifact.load(paths["head"]), signals))
    return paths
