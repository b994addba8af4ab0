"""Session-scoped tiny judge models (random seeded weights, locally trained tokenizers),
saved to tmp dirs and loaded through the same `--model PATH` code path as real models."""
from __future__ import annotations

import os
import sys

import pytest

# `tests` is not a package of its own; make `tests.fixtures` importable under plain `pytest` too
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from tests.fixtures.tiny_models import build_model_dir  # noqa: E402


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
        from baer_fast.runtime.model.load import load_judge
        if path not in cache:
            cache[path] = load_judge(path)
        return cache[path]
    return get


@pytest.fixture
def loaded(model_dir, loaded_models):
    return loaded_models(model_dir)
