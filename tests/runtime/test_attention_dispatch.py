"""A model loaded with flash-attn 2 (`--attn flash_attention_2`): calls with a 4-D mask run on SDPA.

flash-attn cannot be installed here (nor on the lent GPU machine), so the model is loaded with
SDPA and then marked as flash-attn 2, and transformers' "flash_attention_2" entry is replaced
by a recording stand-in: causal attention aligned bottom-right, as flash-attn's. transformers
reads a 4-D mask handed to flash-attn 2 as a 2-D padding mask, so the stand-in must never see
one; what the engine, the decoder and the naive path compute must not change.
"""
import pytest

from baer_fast.bank.generative import GenerationConfig
from baer_fast.runtime.open import load_judge
from baer_fast.bank.runner import run_experts
from tests.fixtures.checks import max_run_diff
from tests.fixtures.tiny_models import completion_pairs, make_pairs

EXPERTS = ["direct", "score", "pointwise", "cot"]
GEN = GenerationConfig(max_new_tokens={"cot": 6})


@pytest.fixture
def flash_marked(qwen_dir, monkeypatch):
    """-> (model marked as flash-attn 2, masks the stand-in was handed)."""
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    seen = []

    def stand_in(module, query, key, value, attention_mask, **kwargs):
        seen.append(attention_mask)
        q, k = query.shape[2], key.shape[2]
        causal = torch.ones(q, k, dtype=torch.bool, device=query.device).tril(k - q)
        return sdpa_attention_forward(module, query, key, value, causal[None, None], **kwargs)

    monkeypatch.setitem(ALL_ATTENTION_FUNCTIONS._global_mapping, "flash_attention_2", stand_in)
    loaded = load_judge(qwen_dir)
    loaded.base.config._attn_implementation = "flash_attention_2"
    return loaded, seen


def _pairs(tok):
    # a reward loop's group (rows with pasts of different lengths) and ordinary pairs
    return completion_pairs(tok, 30, (20, 45, 8)) + make_pairs(3, seed=5)


def test_masked_calls_never_reach_flash(flash_marked, loaded_models, qwen_dir):
    flash, seen = flash_marked
    pairs = _pairs(flash.tokenizer)
    want = run_experts(loaded_models(qwen_dir), pairs, experts=EXPERTS, generation=GEN)
    from tests.fixtures.tolerances import readout_tol
    tol = readout_tol(loaded_models(qwen_dir), pairs)     # other paths, other rounding: 2x the naive error each
    # with cot in the bank, the prefix path's prompts all go through the decoder (masked calls
    # only); the single-pass bank alone has the engine's unmasked roots, the naive path only those
    for experts, naive in ((EXPERTS, False), (EXPERTS, True), (EXPERTS[:3], False)):
        seen.clear()
        got = run_experts(flash, pairs, experts=experts, generation=GEN, naive=naive)
        assert all(m is None for m in seen)                # flash ran only on unmasked calls...
        assert bool(seen) == (naive or "cot" not in experts)   # ...wherever there were some
        assert flash.base.config._attn_implementation == "flash_attention_2"
        assert max_run_diff(got, want, experts) <= tol


def test_swap_survives_an_error(flash_marked):
    import torch
    flash, _ = flash_marked
    bad = torch.zeros((1, 1, 3, 2))                        # a mask of the wrong width
    with pytest.raises(Exception):
        flash.hidden(torch.tensor([[5, 6, 7]]), torch.arange(3)[None], bad, None)
    assert flash.base.config._attn_implementation == "flash_attention_2"
