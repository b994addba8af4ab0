"""RewardBench (allenai/reward-bench, the `filtered` split) -> pairs; no judge outputs.

Records `{prompt, chosen, rejected, subset, id}` (plus `chosen_model`/`rejected_model`), from
a .jsonl/.json/.parquet file or a folder of them. In a snapshot of the hub dataset the `raw-*`
(earlier `train-*`) files, a superset with the same ids, are skipped beside `filtered-*`.
`category` is the subset's leaderboard section (chat, chat-hard, safety, reasoning; the prior
sets' subsets -> prior-sets).
"""
from __future__ import annotations

import os

from baer_fast.io.adapters import Imported
from baer_fast.io.adapters._conv import from_messages
from baer_fast.io.adapters._rows import chosen_rejected_pair, convert, files, rows, summary

# RewardBench's section -> subsets map (SUBSET_MAPPING in rewardbench/constants.py of
# github.com/allenai/reward-bench) and the prior sets its leaderboard averages ("Prior Sets").
SECTIONS = {
    "chat": ("alpacaeval-easy", "alpacaeval-length", "alpacaeval-hard", "mt-bench-easy", "mt-bench-med"),
    "chat-hard": ("mt-bench-hard", "llmbar-natural", "llmbar-adver-neighbor", "llmbar-adver-GPTInst",
                  "llmbar-adver-GPTOut", "llmbar-adver-manual"),
    "safety": ("refusals-dangerous", "refusals-offensive", "xstest-should-refuse", "xstest-should-respond",
               "donotanswer"),
    "reasoning": ("math-prm", "hep-cpp", "hep-go", "hep-java", "hep-js", "hep-python", "hep-rust"),
    "prior-sets": ("anthropic_helpful", "anthropic_hhh", "shp", "summarize"),
}
SECTION_OF = {s: sec for sec, subsets in SECTIONS.items() for s in subsets}


def _build(row):
    subset = row.need("subset")
    rid = row.need("id", (str, int))
    prompt = row.obj.get("prompt")
    question = (tuple(from_messages(prompt, row=row, field="prompt")) if isinstance(prompt, list)
                else row.need("prompt"))
    if isinstance(question, tuple):
        question = question[0][1] if len(question) == 1 else question
    models = {k: {"model": row.obj[f"{k}_model"]} for k in ("chosen", "rejected")
              if isinstance(row.obj.get(f"{k}_model"), str)}
    return chosen_rejected_pair(f"rewardbench-{rid}", question, row.need("chosen"), row.need("rejected"),
                                chosen_meta=models.get("chosen"), rejected_meta=models.get("rejected"),
                                subset=subset, category=SECTION_OF.get(subset))


def load(src: str, *, rejects=None, options=None) -> Imported:
    # A snapshot of the hub dataset holds data/filtered-*.parquet and the superset it was cut from
    # (data/raw-*, earlier data/train-*; same ids): beside a filtered file, the others are skipped.
    filtered = os.path.isdir(src) and any(os.path.basename(p).startswith("filtered") for p in files(src))
    skipped = []

    def keep(path: str) -> bool:
        name = os.path.basename(path)
        if filtered and name.startswith(("raw-", "train-")):
            skipped.append(name)
            return False
        return True

    pairs, dropped = convert(rows(src, rejects, keep), _build, rejects)
    out = Imported(pairs)
    out.notes.append(summary("rewardbench", pairs, dropped)
                     + (f"; read the filtered split, skipped {', '.join(sorted(skipped))}" if skipped else ""))
    unknown = sorted({p.subset for p in pairs if p.category is None})
    if unknown:
        out.notes.append(f"rewardbench: subsets outside the leaderboard's sections (no category): {', '.join(unknown)}")
    return out
