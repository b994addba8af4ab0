"""MiniCPM3: multi-head latent attention like DeepSeek-V2 (tests/runtime/test_mla.py), with its
own rotary (cos/sin, not interleaved), a q_lora path, scaled embeddings and residuals, and logits
divided by hidden_size / dim_model_base. Its cache holds the compressed latents: the normed KV
latent [1, kv_lora_rank] where keys go and the rotated key part [1, qk_rope_head_dim] where values
go, shapes no config field states, so the engine and the decoder take them from the probe at
load. Tiny random model (tests/fixtures/tiny_models.py `_BY_NAME["minicpm3"]`)."""
import pytest

from tests.fixtures.checks import assert_decoder_equals_generate
from tests.fixtures.tolerances import assert_engine_matches_naive, fp32_tol
from tests.fixtures.tiny_models import build_model_dir, make_pairs


@pytest.fixture(scope="module")
def minicpm3_dir(tmp_path_factory):
    return build_model_dir(str(tmp_path_factory.mktemp("minicpm3")), arch="minicpm3", seed=11)


@pytest.fixture(scope="module")
def minicpm3(minicpm3_dir, loaded_models):
    return loaded_models(minicpm3_dir)


def test_cache_shapes_are_probed(minicpm3):
    import torch
    from transformers import DynamicCache

    from baer_fast.runtime.model.load import config_kv_dims
    cfg = minicpm3.model.config
    (hk, dk), (hv, dv) = minicpm3.kv_shape()
    assert ((hk, dk), (hv, dv)) == ((1, cfg.kv_lora_rank), (1, cfg.qk_rope_head_dim))
    assert (hk, dk) not in config_kv_dims(cfg)                     # the config's heads x head_dim fit neither
    cache = DynamicCache()
    with torch.inference_mode():
        minicpm3.hidden(torch.tensor([[5, 6, 7]]), torch.arange(3)[None], None, cache)
    held = sum(t.numel() * t.element_size() for layer in cache.layers for t in (layer.keys, layer.values))
    assert held == 3 * minicpm3.kv_bytes_per_token
    assert minicpm3.kv_bytes_per_token == cfg.num_hidden_layers * (hk * dk + hv * dv) * 4


def test_logits_are_its_forwards(minicpm3):
    """The loader reads the logit division (hidden 64 / dim_model_base 16) and the readout applies it."""
    import torch

    from baer_fast.runtime.model.readout import model_logits
    assert minicpm3.logit_scale == pytest.approx(16 / 64)
    ids = torch.tensor([[5, 9, 40, 7, 300, 12]])
    with torch.inference_mode():
        theirs = minicpm3.model(input_ids=ids).logits[0]
        ours = model_logits(minicpm3, minicpm3.hidden(ids, torch.arange(6)[None])[0])
    size = float(theirs.abs().max())
    assert float((theirs - ours).abs().max()) <= fp32_tol(4 * minicpm3.model.config.hidden_size, size)


def test_engine_equals_naive(minicpm3):
    assert_engine_matches_naive(minicpm3, make_pairs(4, seed=6))


def test_decoder_equals_generate(minicpm3):
    from tests.fixtures.prompts import bank_tree_prompts
    assert_decoder_equals_generate(minicpm3, bank_tree_prompts(minicpm3)[:6], 8, max_rows=3)


def test_loads_in_bf16(minicpm3_dir):
    """The load-time probes (cache shapes, logit map) take bf16 rounding for what it is."""
    from baer_fast.runtime.open import load_judge
    assert load_judge(minicpm3_dir, dtype="bfloat16").kv_shape() == ((1, 16), (1, 8))
