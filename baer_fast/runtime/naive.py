"""Naive reference path: each full prompt through one plain forward, no cache, no sharing.

The equality tests and the benchmark compare the prefix engine against this. Token ids in,
verdict log-probabilities out; reads the last position only.
"""
from __future__ import annotations

import time

from baer_fast.runtime.plan.prefix_tree import causal_scores
from baer_fast.runtime.queries import EngineResult, EngineStats, Query
from baer_fast.runtime.model.readout import read_model


class NaiveEngine:
    kind = "naive"              # capabilities: see interfaces.Engine
    takes_prefix_kv = False
    shares_prefixes = False     # the reference: no prompt rides in another's prefill (run_generative)

    def __init__(self, loaded, *, kernels: str = "auto"):
        self.loaded, self.kernels = loaded, kernels

    def plan_tokens(self, groups: list[list[Query]]) -> list[int]:
        return [sum(len(q.ids) for q in group) for group in groups]

    def run(self, groups: list[list[Query]]) -> EngineResult:
        import torch
        t0, stats = time.perf_counter(), EngineStats()
        out = []
        with torch.inference_mode():
            for group in groups:
                out.append([self._one(q, stats) for q in group])
        stats.seconds = time.perf_counter() - t0
        return EngineResult(out, self.plan_tokens(groups), stats)

    def _one(self, q: Query, stats: EngineStats) -> list[float]:
        import torch
        dev = self.loaded.device
        ids = torch.tensor([q.ids], dtype=torch.long, device=dev)
        hidden = self.loaded.hidden(ids)                                   # [1, T, H]
        choices = torch.tensor(q.choices, dtype=torch.long, device=dev)
        lp = read_model(self.loaded, hidden[:, -1], choices, kernels=self.kernels)
        stats.tokens_prefilled += len(q.ids)
        stats.tokens_computed += len(q.ids)
        stats.scores_computed += causal_scores(len(q.ids))
        stats.forwards += 1
        stats.kv_bytes_peak = max(stats.kv_bytes_peak, len(q.ids) * self.loaded.kv_bytes_per_token)
        return lp[0].double().tolist()
