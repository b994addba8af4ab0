"""Stop rules shared by the hf decoder and the vLLM backend: EOS ids, stop strings, trimming.

Token ids and a tokenizer in, decisions out; knows nothing about slots or models' forwards.
"""
from __future__ import annotations


def hits_stop(tok, out: list[int], stop: tuple[str, ...]) -> bool:
    """Did the last token complete a stop string? Only the decoded tail is examined."""
    longest = max(len(s) for s in stop)
    tail = tok.decode(out[-(longest + 8):], skip_special_tokens=False)
    prev = tok.decode(out[-(longest + 8):-1], skip_special_tokens=False) if len(out) > 1 else ""
    return any(s in tail and s not in prev for s in stop)


def finish_reason(tok, out: list[int], *, eos, stop: tuple[str, ...], budget: int) -> str:
    """"eos" | "stop" | "length" | "" (go on) after the last token of `out`, in that order."""
    if out[-1] in eos:
        return "eos"
    if stop and hits_stop(tok, out, stop):
        return "stop"
    return "length" if len(out) >= budget else ""


def trim_generation(tok, ids: tuple[int, ...], finish: str, stop) -> tuple[int, ...]:
    """The kept generation: EOS dropped, or the tokens that completed a stop string dropped
    (until it no longer appears in the decoded text)."""
    if finish == "eos":
        return ids[:-1]
    if finish == "stop":
        while ids and any(s in tok.decode(ids, skip_special_tokens=False) for s in stop):
            ids = ids[:-1]
    return ids


def eos_token_ids(loaded) -> frozenset:
    """EOS ids as `generate` would use them: the generation config's, else the model config's,
    else the tokenizer's."""
    gen = getattr(loaded.model, "generation_config", None)
    eos = getattr(gen, "eos_token_id", None) if gen is not None else None
    return eos_set(eos if eos is not None else getattr(loaded.model.config, "eos_token_id", None), loaded.tokenizer)


def eos_set(eos, tokenizer) -> frozenset:
    """The configs' eos_token_id (an id, a list of ids, or None) as a set, falling back to the
    tokenizer's EOS; the one rule of the hf decoder and the vLLM backend's (vllm.backend.eos_ids)."""
    ids = set([eos] if isinstance(eos, int) else (eos or ()))
    if not ids and getattr(tokenizer, "eos_token_id", None) is not None:
        ids.add(tokenizer.eos_token_id)
    return frozenset(ids)
