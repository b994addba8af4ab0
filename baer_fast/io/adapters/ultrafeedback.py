"""UltraFeedback -> pairs: openbmb/UltraFeedback's rated completions, or a binarized copy.

openbmb records `{source, instruction, completions: [{model, response, overall_score,
"fine-grained_score", ...}]}` (the hub snapshot: one file per source). The highest- and the
lowest-rated completion (first among equals) form a pair, as the paper builds them; all-equal
ratings or fewer than two rated completions drop the row. `--rating`: overall_score (default) or
fine-grained_score. Subset = `source`.
Binarized rows (HuggingFaceH4 / trl-lib ultrafeedback_binarized: `chosen`, `rejected` message
lists, `score_chosen`, `score_rejected`) keep the copy's own pair (best vs a random other);
equal scores drop the row; `*_sft` / `*_gen` files, the same prompts, are skipped beside `*_prefs`.
Ids: `ultrafeedback-<id | prompt_id>`, else `ultrafeedback-<file stem>-<line>`.
"""
from __future__ import annotations

import math
import os

from baer_fast.io.adapters import Imported
from baer_fast.io.adapters._conv import from_messages, split_pair
from baer_fast.io.adapters._rows import chosen_rejected_pair, convert, file_stem, files, rows, skipping, summary

RATINGS = ("overall_score", "fine-grained_score")
_REPEATS = ("_sft", "_gen")      # binarized splits that repeat the prefs splits' prompts


def _number(v):
    if isinstance(v, str):
        try:
            v = float(v)
        except ValueError:
            return None
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def _pair_id(row) -> str:
    rid = row.obj.get("id") or row.obj.get("prompt_id")
    if isinstance(rid, (str, int)) and not isinstance(rid, bool):
        return f"ultrafeedback-{rid}"
    return f"ultrafeedback-{file_stem(row.path)}-{row.line:06d}"


def _rated(row, key: str):
    question = row.need("instruction")
    comps = row.need("completions", list)
    rated = []
    for i, c in enumerate(comps):
        if not isinstance(c, dict) or not isinstance(c.get("response"), str):
            raise row.error(f"completion {i}: expected an object with a string 'response'", "completions")
        if _number(c.get(key)) is not None:
            rated.append(c)
    if len(rated) < 2:
        return "fewer than two rated completions"
    hi = max(rated, key=lambda c: _number(c.get(key)))
    lo = min(rated, key=lambda c: _number(c.get(key)))
    if _number(hi.get(key)) == _number(lo.get(key)):
        return "all ratings tied"
    side = {name: {"model": c.get("model"), "rating": _number(c.get(key))} for name, c in (("c", hi), ("r", lo))}
    return chosen_rejected_pair(_pair_id(row), question, hi["response"], lo["response"],
                                chosen_meta=side["c"], rejected_meta=side["r"],
                                subset=str(row.obj.get("source") or "default"))


def _binarized(row):
    scores = {k: _number(row.obj.get(f"score_{k}")) for k in ("chosen", "rejected")}
    if None not in scores.values() and scores["chosen"] == scores["rejected"]:
        return "chosen and rejected rated equal"
    convs = [from_messages(row.need(k, list), row=row, field=k) for k in ("chosen", "rejected")]
    question, chosen, rejected, diverged = split_pair(*convs, row=row, fields=("chosen", "rejected"))
    return chosen_rejected_pair(_pair_id(row), question, chosen, rejected,
                                meta={"diverged": True} if diverged else None,
                                chosen_meta={"rating": scores["chosen"]}, rejected_meta={"rating": scores["rejected"]},
                                subset=str(row.obj.get("source") or "default"))


def _builder(key: str, kinds: set):
    def build(row):
        binarized = "completions" not in row.obj and "chosen" in row.obj
        kinds.add("binarized" if binarized else key)
        return _binarized(row) if binarized else _rated(row, key)
    return build


def _repeats_prefs(path: str) -> bool:
    """A binarized `*_sft` / `*_gen` split file (the prefs splits' prompts again)."""
    name = os.path.basename(path)
    return any(f"{r}-" in name or f"{r}." in name for r in _REPEATS)


def load(src: str, *, rejects=None, options=None) -> Imported:
    key = getattr(options, "rating", None) or RATINGS[0]
    prefs = os.path.isdir(src) and any("_prefs" in os.path.basename(p) for p in files(src))
    keep, skipped = skipping(lambda path: prefs and _repeats_prefs(path))
    kinds: set = set()
    pairs, dropped = convert(rows(src, rejects, keep), _builder(key, kinds), rejects)
    out = Imported(pairs, dropped=dropped)
    out.notes.append(summary(f"ultrafeedback ({', '.join(sorted(kinds))})", pairs)
                     + (f"; read the prefs splits, skipped {', '.join(sorted(map(os.path.basename, skipped)))}"
                        if skipped else ""))
    return out
