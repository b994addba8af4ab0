"""Every engine and decoder states its capabilities (runtime/interfaces.py) instead of the bank
guessing them with getattr defaults; the hf ones satisfy the Protocols as built by open_engine."""
import pytest

from baer_fast.runtime import interfaces
from baer_fast.runtime.decode import Decoder
from baer_fast.runtime.naive import NaiveEngine
from baer_fast.runtime.open import HfOptions, open_decoder, open_engine
from baer_fast.runtime.prefill import PrefixEngine
from baer_fast.runtime.vllm.backend import VllmDecoder, VllmEngine
from baer_fast.runtime.vllm.dp import DataParallelEngine, _ShardedDecoder

ENGINES = {PrefixEngine: ("prefix", True, True), NaiveEngine: ("naive", False, False),
           VllmEngine: ("vllm", False, True), DataParallelEngine: ("vllm", False, True)}
DECODERS = {Decoder: (True, True), VllmDecoder: (False, False), _ShardedDecoder: (False, False)}


@pytest.mark.parametrize("cls", list(ENGINES), ids=lambda c: c.__name__)
def test_engines_state_their_capabilities(cls):
    assert (cls.kind, cls.takes_prefix_kv, cls.shares_prefixes) == ENGINES[cls]
    assert callable(cls.run) and callable(cls.plan_tokens)


@pytest.mark.parametrize("cls", list(DECODERS), ids=lambda c: c.__name__)
def test_decoders_state_their_capabilities(cls):
    assert (cls.reads_prompts, cls.exports_prefixes) == DECODERS[cls]
    assert callable(cls.generate)


def test_opened_hf_engines_and_decoder_satisfy_the_protocols(loaded):
    from baer_fast.bank.generative import GenerationConfig
    prefix, naive = open_engine(loaded), open_engine(loaded, options=HfOptions(naive=True))
    assert isinstance(prefix, PrefixEngine) and isinstance(naive, NaiveEngine)
    assert isinstance(prefix, interfaces.Engine) and isinstance(naive, interfaces.Engine)
    assert open_engine(prefix) is prefix                   # an engine is returned as is
    decoder = open_decoder(prefix, GenerationConfig())
    assert isinstance(decoder, Decoder) and isinstance(decoder, interfaces.Decoder)
    assert decoder.stats is not None
