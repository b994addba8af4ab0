"""The runtime's two interfaces, as `typing.Protocol`s: what the bank may call and read.

An Engine takes token ids and returns constrained verdict log-probabilities; a Decoder turns
generation requests into tokens. Capabilities are explicit attributes every implementation
sets (no `getattr` defaults): the bank asks them, never the type.

    Engine    prefill.PrefixEngine, naive.NaiveEngine, vllm.backend.VllmEngine, vllm.dp.DataParallelEngine
    Decoder   decode.Decoder, vllm.backend.VllmDecoder, vllm.dp's sharded decoder

`runtime/open.py` builds them; the data types they exchange are in `queries.py` (engines) and
`decode.py` (GenRequest, GenResult).
"""
from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from baer_fast.runtime.queries import EngineResult, Query


@runtime_checkable
class Engine(Protocol):
    kind: str                 # what signals' meta "engine" says: "prefix", "naive" or "vllm"
    takes_prefix_kv: bool     # run(groups, given=..., keep=...) takes prefix KV computed elsewhere (the decoder's,
                              # an earlier call's) and hands kept KV back; such an engine also has
                              # `prefix_store` (None, or a cascade's bank/prefix_store.PrefixStore) and `held_outside`
    shares_prefixes: bool     # prompts of one call share their prefixes' prefill (not the naive reference)
    loaded: Any               # the model: tokenizer, name, context_len (and the torch model on hf)

    def plan_tokens(self, groups: list[list[Query]]) -> list[int]:
        """Tokens the engine would prefill per group, without running."""

    def run(self, groups: list[list[Query]]) -> EngineResult:
        """Log-probabilities over each query's choices (given=... only where takes_prefix_kv)."""


@runtime_checkable
class Decoder(Protocol):
    reads_prompts: bool       # takes GenRequest.reads_prompt requests (prompt reads in its prefill tree)
    exports_prefixes: bool    # generate(export=...) hands out prompt-prefix KV (`exported`)
    stats: Any                # DecodeStats (tokens prefilled, KV peak), or None where not counted

    def generate(self, requests: list) -> list:
        """GenResult per GenRequest, in order (export=... only where exports_prefixes)."""
