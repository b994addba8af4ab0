"""Rotary embeddings whose frequencies depend on the call's longest position (longrope: Phi-3/3.5/4-mini).

Past the original length such a model rotates every token of a call with its long factors, so a
prefix computed in a short call differs from the same tokens in a plain forward of a longer
prompt: no prefix sharing can equal it. Below that length the frequencies are fixed. The loader
holds prompts to the original length, and the context-window error says so.
"""
import logging

import pytest

from baer_fast.errors import InputError
from baer_fast.io.records import Pair
from baer_fast.runtime.open import load_judge
from baer_fast.bank.runner import run_experts
from tests.fixtures.checks import engine_vs_naive
from tests.fixtures.tiny_models import build_model_dir

ORIGINAL = 160


@pytest.fixture(scope="module")
def phi3_dir(tmp_path_factory):
    half = 8                                                     # head_dim 16 / 2
    return build_model_dir(str(tmp_path_factory.mktemp("phi3")), arch="phi3", seed=8, head_dim=16,
                           original_max_position_embeddings=ORIGINAL,
                           rope_parameters={"rope_type": "longrope", "rope_theta": 10000.0,
                                            "short_factor": [1.0] * half, "long_factor": [3.0 + k for k in range(half)]})


def test_prompts_are_held_to_the_original_length(phi3_dir, caplog):
    with caplog.at_level(logging.WARNING, logger="baer_fast"):
        loaded = load_judge(phi3_dir)
    assert loaded.context_len == ORIGINAL
    assert any("longrope" in r.getMessage() and str(ORIGINAL) in r.getMessage() for r in caplog.records)
    short = [Pair("s1", "Add 2 and 3.", "5", "6"), Pair("s2", "Name a prime.", "7", "9 is one")]
    assert engine_vs_naive(loaded, short) <= 1e-5
    with pytest.raises(InputError, match=f"long1.*\\({ORIGINAL}\\)"):
        run_experts(loaded, [Pair("long1", "q " * 40, "word " * 60, "other " * 60)], experts=["direct"])


def test_past_the_original_length_sharing_cannot_be_exact(phi3_dir, monkeypatch):
    """Why the limit: with it lifted, a prompt past it differs from its plain forward, because
    the call computing its shared [system][question] holds only early positions and rotates
    them with the short factors, the plain forward with the long ones."""
    loaded = load_judge(phi3_dir)
    monkeypatch.setattr(loaded, "context_len", 4096)
    pairs = [Pair("long1", "Which is better?", "word " * 60, "other " * 60)]   # root short, prompt long
    assert engine_vs_naive(loaded, pairs) > 1e-4
