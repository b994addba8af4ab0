"""Judges whose forward changes the logits after the LM head: the readout must be the model's own.

The engine, the naive path and the decoder compute logits from the final normed hidden state and
the LM-head rows. Granite divides the logits by `logits_scaling`, Cohere multiplies them by
`logit_scale`, Gemma 2 soft-caps them (c * tanh(x / c)); without those the constrained
distribution is sharper or flatter than the model's. Each is checked against the model's own
forward, and a forward doing something unknown is refused at load.
"""
import pytest

from baer_fast.runtime.model.load import ModelError
from baer_fast.runtime.open import load_judge
from baer_fast.runtime.model.readout import model_logits, read_model
from tests.fixtures.checks import assert_decoder_equals_generate
from tests.fixtures.tolerances import assert_engine_matches_naive
from tests.fixtures.tiny_models import build_model_dir, make_pairs

CASES = {
    "granite": (dict(logits_scaling=4.0), "sdpa", (0.25, None)),
    "cohere": (dict(logit_scale=0.5), "sdpa", (0.5, None)),
    # attention soft-capping needs eager attention; window 24 makes its layers mixed (sliding, full)
    "gemma2": (dict(final_logit_softcapping=2.0, attn_logit_softcapping=5.0, sliding_window=24,
                    query_pre_attn_scalar=16), "eager", (1.0, 2.0)),
}


@pytest.fixture(scope="module", params=sorted(CASES))
def mapped(request, tmp_path_factory):
    extra, attn, want = CASES[request.param]
    path = build_model_dir(str(tmp_path_factory.mktemp(request.param)), arch=request.param, seed=9, **extra)
    loaded = load_judge(path, attn=attn)
    assert (loaded.logit_scale, loaded.logit_softcap) == want
    return loaded


def _prompts(loaded, n=4, seed=0):
    import random
    rng = random.Random(seed)
    return [[rng.randrange(10, len(loaded.tokenizer)) for _ in range(rng.randint(30, 60))] for _ in range(n)]


def test_readout_is_the_models_own_distribution(mapped, monkeypatch):
    """Within 2x the model's own fp32 forward error vs its float64 forward (paths_tol), logits and
    log-probs alike; without the map the log-probs differ by more than that."""
    import torch

    from tests.fixtures.tolerances import as_float64, paths_tol
    choices = torch.tensor([3, 7, 11, 40])
    exact = as_float64(mapped)
    for ids in _prompts(mapped):
        x = torch.tensor([ids])
        with torch.inference_mode():
            theirs = mapped.model(input_ids=x, use_cache=False).logits[0, -1].float()
            theirs64 = exact.model(input_ids=x, use_cache=False).logits[0, -1]
            h = mapped.hidden(x)[0, -1:]
            full = model_logits(mapped, h)[0]
            lp = read_model(mapped, h, choices, kernels="torch")[0]
        tol = paths_tol(float((theirs.double() - theirs64).abs().max()), float(theirs64.abs().max()))
        lp64 = torch.log_softmax(theirs64[choices], -1)
        lp_tol = paths_tol(float((torch.log_softmax(theirs[choices], -1).double() - lp64).abs().max()),
                           float(lp64.abs().max()))
        assert torch.allclose(full, theirs, atol=tol, rtol=0)
        assert torch.allclose(lp, torch.log_softmax(theirs[choices], -1), atol=lp_tol, rtol=0)
        monkeypatch.setattr(mapped, "logit_scale", 1.0)          # without the map: another distribution
        monkeypatch.setattr(mapped, "logit_softcap", None)
        with torch.inference_mode():
            assert float((read_model(mapped, h, choices, kernels="torch")[0] - lp).abs().max()) > 100 * lp_tol
        monkeypatch.undo()


def test_engine_equals_naive(mapped):
    assert_engine_matches_naive(mapped, make_pairs(4, seed=2))


def test_decoder_equals_generate(mapped):
    assert_decoder_equals_generate(mapped, _prompts(mapped, 3, seed=1), 8, max_rows=2)


def test_unknown_logit_processing_is_refused(qwen_dir, monkeypatch):
    from transformers import Qwen3ForCausalLM
    forward = Qwen3ForCausalLM.forward

    def scaled(self, *args, **kwargs):
        out = forward(self, *args, **kwargs)
        out.logits = out.logits * 3.0
        return out
    monkeypatch.setattr(Qwen3ForCausalLM, "forward", scaled)
    with pytest.raises(ModelError, match="Qwen3ForCausalLM.*after the LM head"):
        load_judge(qwen_dir)


@pytest.mark.parametrize("capped", [True, False])
def test_no_sdpa_picks_eager(tmp_path, caplog, capped):
    """SDPA cannot soft-cap attention scores, and transformers has no SDPA Gemma 2 at all: the
    default attention becomes eager, with a warning saying why."""
    import logging
    extra = dict(CASES["gemma2"][0], **({} if capped else {"attn_logit_softcapping": None}))
    path = build_model_dir(str(tmp_path / "gemma2"), arch="gemma2", seed=9, **extra)
    with caplog.at_level(logging.WARNING, logger="baer_fast"):
        loaded = load_judge(path)
    assert loaded.model.config._attn_implementation == "eager"
    why = "soft-caps its attention" if capped else "has no SDPA attention"
    assert any(why in r.getMessage() for r in caplog.records)
    assert_engine_matches_naive(loaded, make_pairs(2, seed=3), ["direct"])
