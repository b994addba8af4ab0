"""A tiny judge model and a head artifact fitted on its own expert signals (no downloads)."""
from __future__ import annotations

import random

import pytest

from tests.fixtures.tiny_models import build_model_dir

WORDS = "the answer is correct because python code returns the sum of a list of numbers".split()


def synthetic_pairs(n: int, seed: int = 0):
    from baer_fast.io.records import Pair
    rng = random.Random(seed)
    pairs = []
    for i in range(n):
        q = " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 12))) + "?"
        a = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 30)))
        b = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 30)))
        pairs.append(Pair(f"t{i:03d}", q, a, b, label=rng.choice("ab"),
                          split=("selection", "calibration", "test")[i % 3]))
    return pairs


@pytest.fixture(scope="session")
def judge_dir(tmp_path_factory):
    return build_model_dir(str(tmp_path_factory.mktemp("judge")), arch="qwen3", seed=1, max_pos=512)


@pytest.fixture(scope="session")
def head_path(judge_dir, tmp_path_factory):
    """Single-pass bank on 30 labelled synthetic pairs -> stack head with frozen derived params."""
    from baer_fast import artifact
    from baer_fast.bank.runner import RunReport, run_experts
    from baer_fast.selection.fit import fit_condition

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
