"""Tiny judge models for the generative tests (fp32, random seeded weights, local tokenizers).

These random models rarely emit EOS, so every test uses small budgets (4-16 tokens)."""
from __future__ import annotations

import pytest

from tests.fixtures.tiny_models import build_model_dir


@pytest.fixture(scope="session")
def gen_models(tmp_path_factory):
    cache = {}

    def get(arch: str):
        from baer_fast.runtime.model.load import load_judge
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


def pairs(n: int, *, seed: int = 0):
    """Pairs of varied lengths; every third is a test row."""
    import random

    from baer_fast.io.records import Pair
    from tests.fixtures.tiny_models import _WORDS
    rng = random.Random(seed)

    def text(k):
        return " ".join(rng.choice(_WORDS) for _ in range(k)) + rng.choice([".", "!", " 42.", "?"])
    return [Pair(f"g{i:03d}", text(rng.randint(3, 20)), text(rng.randint(1, 30)), text(rng.randint(1, 30)),
                 label=rng.choice(["a", "b"]), split=["selection", "calibration", "test"][i % 3]) for i in range(n)]


def random_prompts(loaded, n: int, *, seed: int = 0, lo: int = 3, hi: int = 40):
    import random
    rng = random.Random(seed)
    vocab = len(loaded.tokenizer)
    return [tuple(rng.randrange(10, vocab) for _ in range(rng.randint(lo, hi))) for _ in range(n)]


def bank_tree_prompts(loaded) -> list[tuple[int, ...]]:
    """Token-id prompts shaped like a generative bank's: a shared template, per pair a question,
    per display order an [A][B] under three instructions, a candidate-blind prompt, and one
    prompt twice."""
    def rp(n, seed):
        return random_prompts(loaded, 1, seed=seed, lo=n, hi=n)[0]
    root, prompts = rp(12, 20), []
    for pair in range(3):
        q, a, b = rp(9, 30 + pair), rp(20, 40 + pair), rp(15, 50 + pair)
        for first, second in ((a, b), (b, a)):
            prompts += [root + q + first + second + rp(k + 2, 60 + k) for k in range(3)]
        prompts.append(root + q + rp(4, 70))
    prompts.append(prompts[4])
    return prompts
