"""Session-scoped tiny judge models (random seeded weights, locally trained tokenizers),
saved to tmp dirs and loaded through the same `--model PATH` code path as real models."""
from __future__ import annotations

import pytest

from tests.fixtures.tiny_models import build_model_dir


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
        from baer_fast.runtime.model_loader import load_judge
        if path not in cache:
            cache[path] = load_judge(path)
        return cache[path]
    return get


@pytest.fixture
def loaded(model_dir, loaded_models):
    return loaded_models(model_dir)


def make_pairs(n: int, *, seed: int = 0, long: int = 1):
    """Pairs of varied lengths (so batches pad differently); every third is a test row."""
    import random

    from baer_fast.io.records import Pair
    from tests.fixtures.tiny_models import _WORDS
    rng = random.Random(seed)

    def text(k):
        return " ".join(rng.choice(_WORDS) for _ in range(k)) + rng.choice([".", "!", " 42.", "?"])
    return [Pair(f"p{i:03d}", text(rng.randint(3, 25) * long), text(rng.randint(1, 40) * long),
                 text(rng.randint(1, 40) * long), label=rng.choice(["a", "b"]),
                 split=["selection", "calibration", "test"][i % 3]) for i in range(n)]
