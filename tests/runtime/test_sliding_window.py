"""Judges with sliding-window attention layers (Mistral; Qwen2/3 and Gemma 2/3 style mixed layers).

A sliding layer hides every key `window` or more positions behind the query. transformers
applies that in a plain forward (the naive path, `generate`); the engine's tree masks and the
decoder's slot masks must apply it too, per layer type, or prompts longer than the window get
attention the model never had. The windows here (24 tokens) are far shorter than the prompts.
"""
import pytest

from baer_fast.runtime.model.load import ModelError, attention_windows
from tests.fixtures.checks import assert_decoder_equals_generate, engine_vs_naive
from tests.fixtures.tiny_models import build_model_dir, completion_pairs, make_pairs

WINDOW = 24

# every torch.empty float starts as NaN: an unwritten column read anywhere shows up (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("poisoned_empty")


@pytest.fixture(scope="module", params=["mistral", "qwen3-mixed", "gemma3", "gemma3-multimodal"])
def sliding(request, tmp_path_factory, loaded_models):
    path = str(tmp_path_factory.mktemp(request.param))
    if request.param == "mistral":                     # every layer sliding, no layer_types
        build_model_dir(path, arch="mistral", seed=5, sliding_window=WINDOW)
        want = {"sliding_attention": WINDOW}
    elif request.param == "qwen3-mixed":               # layer 0 full, layer 1 sliding: a mask per type
        build_model_dir(path, arch="qwen3", seed=6, use_sliding_window=True, sliding_window=WINDOW,
                        max_window_layers=1)
        want = {"full_attention": None, "sliding_attention": WINDOW}
    else:       # Gemma 3: local and global layers, own rotary bases; 4B+ checkpoints carry a vision tower
        arch = "gemma3" if request.param == "gemma3" else "gemma3_multimodal"
        build_model_dir(path, arch=arch, seed=7, layers=3, sliding_window=WINDOW, query_pre_attn_scalar=16,
                        layer_types=["sliding_attention", "sliding_attention", "full_attention"])
        want = {"full_attention": None, "sliding_attention": WINDOW}
    loaded = loaded_models(path)
    assert loaded.windows == want
    return loaded


def _pairs(tok):
    # a reward loop's group (rows with pasts of different lengths in one forward) and ordinary pairs
    return completion_pairs(tok, 30, (20, 45, 8)) + make_pairs(4, seed=3)


@pytest.mark.parametrize("query_slice", [7, 256])
def test_engine_equals_naive(sliding, monkeypatch, query_slice):
    monkeypatch.setattr("baer_fast.runtime.plan.chunks.QUERY_SLICE", query_slice)
    assert engine_vs_naive(sliding, _pairs(sliding.tokenizer)) <= 1e-5


def test_engine_with_the_stock_cache_equals_naive(sliding, monkeypatch):
    from baer_fast.runtime.model import past_cache
    monkeypatch.setattr("baer_fast.runtime.plan.chunks.QUERY_SLICE", 7)
    monkeypatch.setattr(past_cache, "inplace_cache", lambda *args, **kwargs: None)   # past right-aligned
    assert engine_vs_naive(sliding, _pairs(sliding.tokenizer)) <= 1e-5


def test_the_window_matters_here(sliding, monkeypatch):
    """Masks that ignore the window (full attention everywhere) give other verdicts on these pairs
    (the naive path's masks are transformers' own)."""
    monkeypatch.setattr(sliding, "windows", {"full_attention": None})
    assert engine_vs_naive(sliding, _pairs(sliding.tokenizer)) > 1e-3


def test_decoder_equals_generate(sliding):
    from tests.fixtures.prompts import bank_tree_prompts
    prompts = bank_tree_prompts(sliding)[:8]
    assert min(len(p) for p in prompts) > WINDOW
    assert_decoder_equals_generate(sliding, prompts, 12, max_rows=4)


def test_unsupported_layer_types_are_refused():
    from transformers import Qwen3Config
    cfg = Qwen3Config(num_hidden_layers=2, layer_types=["full_attention", "full_attention"])
    assert attention_windows(cfg) == {"full_attention": None}
    cfg.layer_types = ["full_attention", "linear_attention"]
    with pytest.raises(ModelError, match="linear_attention"):
        attention_windows(cfg)
