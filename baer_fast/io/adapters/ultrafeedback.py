"""UltraFeedback (openbmb/UltraFeedback) records -> highest- vs lowest-rated completion pairs.

Records `{source, instruction, completions: [{model, response, overall_score,
"fine-grained_score", ...}], ...}`. Per instruction the completion with the highest rating and
the one with the lowest (first in order among equals) form a pair; an instruction whose
ratings are all equal, or with fewer than two rated completions, is dropped (as the paper
builds its pairs). Rating: `overall_score` (default) or `fine-grained_score` (`--rating`).
Subset = `source`. Ids: `ultrafeedback-<line>` (or the record's `id`/`prompt_id`).
"""
from __future__ import annotations

import math

from baer_fast.io.adapters import Imported
from baer_fast.io.adapters._rows import chosen_rejected_pair, convert, rows, summary

RATINGS = ("overall_score", "fine-grained_score")


def _rating(c: dict, key: str):
    v = c.get(key)
    if isinstance(v, str):
        try:
            v = float(v)
        except ValueError:
            return None
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def _builder(key: str):
    def build(row):
        question = row.need("instruction")
        comps = row.need("completions", list)
        rated = []
        for i, c in enumerate(comps):
            if not isinstance(c, dict) or not isinstance(c.get("response"), str):
                raise row.error(f"completion {i}: expected an object with a string 'response'", "completions")
            if _rating(c, key) is not None:
                rated.append(c)
        if len(rated) < 2:
            return "fewer than two rated completions"
        hi = max(rated, key=lambda c: _rating(c, key))
        lo = min(rated, key=lambda c: _rating(c, key))
        if _rating(hi, key) == _rating(lo, key):
            return "all ratings tied"
        rid = row.obj.get("id") or row.obj.get("prompt_id")
        pid = f"ultrafeedback-{rid}" if isinstance(rid, (str, int)) else f"ultrafeedback-{row.line:06d}"
        side = {name: {"model": c.get("model"), "rating": _rating(c, key)} for name, c in (("c", hi), ("r", lo))}
        return chosen_rejected_pair(pid, question, hi["response"], lo["response"],
                                    chosen_meta=side["c"], rejected_meta=side["r"],
                                    subset=str(row.obj.get("source") or "default"))
    return build


def load(src: str, *, rejects=None, options=None) -> Imported:
    key = getattr(options, "rating", None) or RATINGS[0]
    pairs, dropped = convert(rows(src, rejects), _builder(key), rejects)
    out = Imported(pairs)
    out.notes.append(summary(f"ultrafeedback ({key})", pairs, dropped))
    return out
