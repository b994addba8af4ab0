"""Judges whose cache holds keys and values of different shapes (multi-head latent attention:
DeepSeek-V2/V3, MiniCPM3). The engine's past buffers and the decoder's slots take each shape
from the cache itself, probed at load, not from the config's head_dim."""
import pytest

from tests.fixtures.checks import assert_decoder_equals_generate, engine_vs_naive
from tests.fixtures.tiny_models import build_model_dir, make_pairs

MLA = dict(arch="deepseek_v2", seed=10, kv_heads=4, moe_intermediate_size=32, n_routed_experts=4,
           num_experts_per_tok=2, n_shared_experts=1, first_k_dense_replace=1, kv_lora_rank=16, q_lora_rank=None,
           qk_rope_head_dim=8, qk_nope_head_dim=16, v_head_dim=12)


@pytest.fixture(scope="module")
def mla(tmp_path_factory, loaded_models):
    return loaded_models(build_model_dir(str(tmp_path_factory.mktemp("mla")), **MLA))


def test_cache_shapes_are_probed(mla):
    import torch
    from transformers import DynamicCache
    (hk, dk), (hv, dv) = mla.kv_shape()
    assert (hk, dk) != (hv, dv)                                    # the config's head_dim fits neither
    cache = DynamicCache()
    with torch.inference_mode():
        mla.hidden(torch.tensor([[5, 6, 7]]), torch.arange(3)[None], None, cache)
    layers = mla.model.config.num_hidden_layers
    held = sum(t.numel() * t.element_size() for layer in cache.layers for t in (layer.keys, layer.values))
    assert held == 3 * mla.kv_bytes_per_token and mla.kv_bytes_per_token == layers * (hk * dk + hv * dv) * 4


def test_engine_equals_naive(mla):
    assert engine_vs_naive(mla, make_pairs(4, seed=6)) <= 1e-5


def test_decoder_equals_generate(mla):
    from tests.fixtures.prompts import bank_tree_prompts
    assert_decoder_equals_generate(mla, bank_tree_prompts(mla)[:6], 8, max_rows=3)
