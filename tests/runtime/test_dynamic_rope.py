"""Rotary embeddings whose frequencies depend on the call's longest position (longrope: Phi-3/3.5/4-mini;
dynamic NTK).

Past the original length such a model rotates every token of a call with its long factors (longrope)
or a base grown with the call's length (dynamic NTK), so a prefix computed in a short call differs
from the same tokens in a plain forward of a longer prompt: no prefix sharing can equal it. Below
that length the frequencies are fixed. The loader holds prompts to the original length, and the
context-window error says so.

Dynamic NTK's original length is `max_position_embeddings` itself (transformers' rotary embedding
grows its base past `config.max_position_embeddings`; `rope_parameters` carry only the factor), so
the held window is the config's own, not the factor x longer one the scaling is meant to reach.
"""
import logging

import pytest

from baer_fast.errors import InputError
from baer_fast.io.records import Pair
from baer_fast.runtime.open import load_judge
from baer_fast.bank.runner import run_experts
from tests.fixtures.checks import engine_vs_naive
from tests.fixtures.tolerances import assert_engine_matches_naive
from tests.fixtures.tiny_models import build_model_dir

ORIGINAL = 160
NTK_FACTOR = 4.0


@pytest.fixture(scope="module")
def phi3_dir(tmp_path_factory):
    half = 8                                                     # head_dim 16 / 2
    return build_model_dir(str(tmp_path_factory.mktemp("phi3")), arch="phi3", seed=8, head_dim=16,
                           original_max_position_embeddings=ORIGINAL,
                           rope_parameters={"rope_type": "longrope", "rope_theta": 10000.0,
                                            "short_factor": [1.0] * half, "long_factor": [3.0 + k for k in range(half)]})


@pytest.fixture(scope="module")
def ntk_dir(tmp_path_factory):
    return build_model_dir(str(tmp_path_factory.mktemp("ntk")), arch="llama", seed=9, max_pos=ORIGINAL,
                           rope_parameters={"rope_type": "dynamic", "factor": NTK_FACTOR, "rope_theta": 10000.0})


def test_prompts_are_held_to_the_original_length(phi3_dir, caplog):
    with caplog.at_level(logging.WARNING, logger="baer_fast"):
        loaded = load_judge(phi3_dir)
    assert loaded.context_len == ORIGINAL
    assert any("longrope" in r.getMessage() and str(ORIGINAL) in r.getMessage() for r in caplog.records)
    short = [Pair("s1", "Add 2 and 3.", "5", "6"), Pair("s2", "Name a prime.", "7", "9 is one")]
    assert_engine_matches_naive(loaded, short)
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


def test_dynamic_ntk_prompts_are_held_to_the_original_length(ntk_dir):
    """Not the factor x longer window dynamic NTK scales to: its base grows past ORIGINAL."""
    loaded = load_judge(ntk_dir)
    assert loaded.model.model.rotary_emb.original_max_seq_len == ORIGINAL     # where transformers grows the base
    assert loaded.context_len == ORIGINAL
    short = [Pair("s1", "Add 2 and 3.", "5", "6"), Pair("s2", "Name a prime.", "7", "9 is one")]
    assert_engine_matches_naive(loaded, short)
    with pytest.raises(InputError, match=f"long1.*\\({ORIGINAL}\\)"):
        run_experts(loaded, [Pair("long1", "q " * 40, "word " * 60, "other " * 60)], experts=["direct"])


def test_dynamic_ntk_past_the_original_length_sharing_cannot_be_exact(ntk_dir, monkeypatch):
    """Why the limit: lifted, the call computing the shared root rotates it with the original base,
    the plain forward of the whole prompt with the base grown to its length."""
    loaded = load_judge(ntk_dir)
    monkeypatch.setattr(loaded, "context_len", int(NTK_FACTOR * ORIGINAL))
    pairs = [Pair("long1", "Which is better?", "word " * 60, "other " * 60)]   # root short, prompt long
    assert engine_vs_naive(loaded, pairs) > 1e-4
