"""Canonical work: what the engine computes depends on the batch's content, never its ids,
order, orientation or duplicates.

A batch of pairs is reduced to its distinct contents, each in one canonical orientation
(responses in text order), sorted by content. The engine runs that list; each input pair takes
its content's runs, mirrored with the swap rule (io.records.swap_runs) where its orientation is
the other one. Runs are snapped (protocols.base.snap) first, so the mirror is exact both ways;
a pair whose two responses are one text is its own swap, and its runs become a fixed point of
it (`self_mirror`). Hence, bit for bit: a pair and its swap mirror, duplicates agree, identical
responses score 0, and a permuted or re-labelled batch gives the permuted runs. What still
moves floats is the *set* of other contents in the batch (padding widths, chunking, shared
question prefixes change the rounding of batched matmuls and attention): docs/protocols.md,
"Symmetry and determinism".
"""
from __future__ import annotations

import dataclasses
import json

from baer_fast.io.records import Pair, swap_runs
from baer_fast.protocols.base import snap

_KEY_SWAP = {"ab": "ba", "ba": "ab", "a": "b", "b": "a"}


def content_key(pair: Pair) -> str:
    """The same string for a pair, its swap and its duplicates under any id."""
    a, b = sorted((pair.response_a, pair.response_b))
    return json.dumps([pair.question, a, b], ensure_ascii=False)


def is_flipped(pair: Pair) -> bool:
    """Whether the pair is shown in the non-canonical orientation (responses out of text order)."""
    return pair.response_b < pair.response_a


def canonical(pair: Pair) -> Pair:
    return dataclasses.replace(pair, response_a=pair.response_b, response_b=pair.response_a) \
        if is_flipped(pair) else pair


def plan(pairs: list[Pair]) -> tuple[list[Pair], list[int]]:
    """-> (distinct contents, canonical orientation, sorted by content key; for each input pair
    the index of its content). A content keeps the id of its first input pair (for messages)."""
    first: dict[str, Pair] = {}
    for p in pairs:
        first.setdefault(content_key(p), p)
    keys = sorted(first)
    at = {k: i for i, k in enumerate(keys)}
    return [canonical(first[k]) for k in keys], [at[content_key(p)] for p in pairs]


def chunks(pairs: list[Pair], size: int) -> list[list[Pair]]:
    """Input pairs in content order, `size` distinct contents per chunk (a content's pairs never
    split): the chunks of a file depend on its content only, so do the floats of each chunk."""
    groups: dict[str, list[Pair]] = {}
    for p in pairs:
        groups.setdefault(content_key(p), []).append(p)
    keys = sorted(groups)
    return [[p for k in keys[i:i + size] for p in groups[k]] for i in range(0, len(keys), size)]


def _swap_key(key: str) -> str:
    head, sep, rest = key.partition("/")
    return _KEY_SWAP.get(head, head) + sep + rest


def self_mirror(runs: list) -> list:
    """Snapped runs of a pair whose two responses are the same text -> the nearest fixed point of the
    swap (io.records.swap_runs), so that every antisymmetric head scores the pair exactly 0. Such a
    pair is its own swap, yet its two display orders are computed at different places in a batch and
    round differently (1e-8 in float32). Each (order ab, order ba) pair of runs becomes (v, 1 - v), v
    the mean of the two orders' evidence for a (the one present if the other is missing); an odd run
    list (one order) becomes 1/2."""
    if len(runs) % 2:
        return [None if u is None else 0.5 for u in runs]
    out = []
    for ab, ba in zip(runs[0::2], runs[1::2]):
        seen = [u for u in (ab, None if ba is None else 1.0 - ba) if u is not None]
        v = None if not seen else snap(sum(seen) / len(seen))
        out += [None, None] if v is None else [v, 1.0 - v]
    return out


def restore(rows: list[dict], pairs: list[Pair], at: list[int]) -> list[dict]:
    """Per input pair, its content's row: runs snapped, and mirrored (with the texts' order keys)
    where the pair is flipped; every other field as computed."""
    out = []
    for p, k in zip(pairs, at):
        row = dict(rows[k])
        runs = {name: [snap(u) for u in r] for name, r in row["runs"].items()}
        if p.response_a == p.response_b:
            runs = {name: self_mirror(r) for name, r in runs.items()}
        elif is_flipped(p):
            runs = {name: swap_runs(r) for name, r in runs.items()}
            if "texts" in row:
                row["texts"] = {name: {_swap_key(key): v for key, v in t.items()} for name, t in row["texts"].items()}
        row["runs"] = runs
        out.append(row)
    return out
