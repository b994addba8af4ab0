"""Content-keyed sample seeds: one function for every backend that samples (hf decoder, vLLM).

A sampled row's seed is a hash of (global seed, expert, sample index, the prompt's token ids):
what the model sees, never a pair id or a batch position. A pair and its swap display the same
two prompts (order ab of (q, a, b) is order ba of (q, b, a)), so they draw the same samples; a
duplicate under another id draws the same samples; the batch a row rides in cannot change them.
"""
from __future__ import annotations

import hashlib

MASK = (1 << 63) - 1


def sample_seed(seed: int, expert: str, sample: int, prompt_ids) -> int:
    """63-bit seed of one sampled row, from the global seed, the expert, the sample index and
    the displayed prompt's token ids (the key is exactly what the model is fed)."""
    h = hashlib.sha256()
    h.update(f"{int(seed)}\0{expert}\0{int(sample)}\0".encode())
    h.update(b"".join(int(t).to_bytes(8, "little", signed=True) for t in prompt_ids))
    return int.from_bytes(h.digest()[:8], "little") & MASK


def content_seeds(seed: int, expert: str, prompts_ids) -> list[int]:
    """sample_seed of each prompt, sample index 0 (a duplicate prompt draws the same continuation)."""
    return [sample_seed(seed, expert, 0, ids) for ids in prompts_ids]


def row_seeds(prompts_ids, *, seeds=None, seed: int | None = None, expert: str = "generate") -> list:
    """Per-prompt seeds for a backend's `generate`: `seeds` as given (one per prompt), else with a
    global `seed` the content-keyed ones, else None each (the backend's engine seed)."""
    if seeds is not None:
        seeds = list(seeds)
        if len(seeds) != len(prompts_ids):
            raise ValueError("seeds must have one entry per prompt")
        return seeds
    return content_seeds(seed, expert, prompts_ids) if seed is not None else [None] * len(prompts_ids)
