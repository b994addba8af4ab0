"""The vLLM backend's seeded path keys samples by content, as the hf decoder's does: a stand-in for
vllm (no vllm here) records every request's seed and draws tokens from it alone."""
import random
import sys
import types
import zlib
from types import SimpleNamespace

import pytest

from baer_fast.io.records import Pair, swap_runs
from baer_fast.runtime.seeds import sample_seed


class _Params(SimpleNamespace):
    """vllm.SamplingParams: keeps what it is given."""


class _FakeLLM:
    """vllm.LLM: a sampled row's tokens come from its seed only; a verdict read from the prompt only."""

    def __init__(self):
        self.seen = []        # (prompt ids, seed) of every sampled request

    def reset_prefix_cache(self):
        pass

    def generate(self, prompts, sampling_params, use_tqdm=False):
        out = []
        for p, sp in zip(prompts, sampling_params, strict=True):
            ids = tuple(p["prompt_token_ids"])
            if getattr(sp, "logprob_token_ids", None):              # a verdict read
                h = zlib.crc32(repr(ids).encode())
                step = {t: SimpleNamespace(logprob=-((h >> (4 * k)) % 13) / 4.0)
                        for k, t in enumerate(sp.logprob_token_ids)}
                out.append(SimpleNamespace(outputs=[SimpleNamespace(logprobs=[step])], num_cached_tokens=0))
                continue
            self.seen.append((ids, sp.seed))
            rng = random.Random(sp.seed) if sp.seed is not None else random.Random(0)
            toks = tuple(rng.randrange(300, 900) for _ in range(sp.max_tokens))
            out.append(SimpleNamespace(outputs=[SimpleNamespace(token_ids=toks, finish_reason="length")],
                                       num_cached_tokens=0))
        return out


@pytest.fixture
def engine(monkeypatch):
    from baer_fast.runtime.vllm.backend import VllmEngine, VllmModel
    from tests.fixtures.tiny_models import train_tokenizer
    vllm = types.ModuleType("vllm")
    vllm.SamplingParams = _Params
    inputs = types.ModuleType("vllm.inputs")
    inputs.TokensPrompt = lambda prompt_token_ids: {"prompt_token_ids": prompt_token_ids}
    vllm.inputs = inputs
    monkeypatch.setitem(sys.modules, "vllm", vllm)
    monkeypatch.setitem(sys.modules, "vllm.inputs", inputs)
    return VllmEngine(VllmModel(llm=_FakeLLM(), tokenizer=train_tokenizer(), path="/m/judge", context_len=2048))


PAIR = Pair("x1", "is the code correct?", "no", "yes the python code returns the sum")


def test_the_vllm_decoder_seeds_a_row_by_its_prompt_not_its_pair(engine):
    from baer_fast.bank.generative import GenerationConfig, run_generative
    config = GenerationConfig(max_new_tokens={"self_consistency": 3}, seed=9)
    one = run_generative(engine, [PAIR], ["self_consistency"], config=config)[0]
    swapped = Pair("another-id", PAIR.question, PAIR.response_b, PAIR.response_a)
    two = run_generative(engine, [Pair("z", "q", "a", "b"), swapped], ["self_consistency"], config=config)[1]
    texts, texts_swapped = one["texts"]["self_consistency"], two["texts"]["self_consistency"]
    assert texts["ab"] == texts_swapped["ba"] and texts["ba"] == texts_swapped["ab"]     # the same draws
    assert len(set(texts["ab"])) > 1                                                      # samples differ
    for ids, seed in engine.loaded.llm.seen:
        assert seed in {sample_seed(9, "self_consistency", s, ids) for s in range(5)}
    # through the bank (canonical work, snapped runs) the runs mirror bit for bit on this backend too
    from baer_fast.bank.runner import run_experts
    kw = dict(experts=["self_consistency"], generation=config)
    r1 = run_experts(engine, [PAIR], **kw)[0].experts
    r2 = run_experts(engine, [Pair("z", "q", "a", "b"), swapped], **kw)[1].experts
    assert r2 == {n: swap_runs(r) for n, r in r1.items()}


def test_vllm_generate_with_a_global_seed_keys_each_prompt_by_its_ids(engine):
    s = SimpleNamespace(max_tokens=4, temperature=0.7, top_p=1.0, stop_token_ids=())
    prompts = [(1, 2, 3), (4, 5), (1, 2, 3)]
    a = engine.generate(prompts, s, seed=4)
    b = engine.generate(prompts[::-1], s, seed=4)[::-1]
    assert a == b and a[0] == a[2] and a[0] != a[1]                       # order- and batch-free; duplicates agree
    assert {ids: seed for ids, seed in engine.loaded.llm.seen} == {p: sample_seed(4, "generate", 0, p) for p in prompts}
    with pytest.raises(ValueError, match="one entry per prompt"):
        engine.generate(prompts, s, seeds=[1])
