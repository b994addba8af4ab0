"""What the engines consume and report: token-id queries and token accounting. No torch."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Query:
    ids: tuple[int, ...]          # the full prompt's token ids (what a plain forward would see)
    choices: tuple[int, ...]      # allowed verdict token ids, read after the last id


@dataclass
class EngineStats:
    tokens_prefilled: int = 0     # real tokens run through the model
    tokens_computed: int = 0      # including right padding inside batches
    scores_computed: int = 0      # attention query-key scores per layer and query head, as computed:
                                  # a masked call's dense block counts whole, padding included
    forwards: int = 0             # model calls
    kv_bytes_peak: int = 0        # most KV bytes held at once (between or within forwards)
    seconds: float = 0.0

    def add(self, other: "EngineStats") -> None:
        self.tokens_prefilled += other.tokens_prefilled
        self.tokens_computed += other.tokens_computed
        self.scores_computed += other.scores_computed
        self.forwards += other.forwards
        self.kv_bytes_peak = max(self.kv_bytes_peak, other.kv_bytes_peak)
        self.seconds += other.seconds


@dataclass(frozen=True)
class FlopModel:
    """Forward FLOPs of one judge: 2 per weight per token through the decoder's matrices (MoE
    experts at their routed share) and `per_score` per attention score (Q.K and the weighted V,
    over every layer and query head). Embeddings, norms, rotary and the verdict readout, all
    lower order, are left out: the usual model-FLOPs count (Kaplan et al. 2020; PaLM's MFU)."""
    weights: int                  # decoder matrix weights one token passes through
    per_score: int                # FLOPs of one query-key score, all layers and query heads

    def flops(self, tokens: int, scores: int) -> int:
        return 2 * self.weights * tokens + self.per_score * scores

    def of(self, stats: EngineStats) -> int:
        return self.flops(stats.tokens_computed, stats.scores_computed)


@dataclass
class EngineResult:
    logprobs: list[list[list[float]]]        # [group][query] -> log-probs over its choices
    tokens_per_group: list[int]              # tokens prefilled for each group (one pair)
    stats: EngineStats = field(default_factory=EngineStats)
    kept: dict = field(default_factory=dict)  # prefix ids -> (K, V) asked for by run(keep=...) (prefix engine)
