"""RewardBench (allenai/reward-bench, the `filtered` split) and RewardBench 2 -> pairs; no judge outputs.

Records `{prompt, chosen, rejected, subset, id}` (plus `chosen_model`/`rejected_model`), from
a .jsonl/.json/.parquet file or a folder of them. In a snapshot of the hub dataset only the
`filtered-*` files are read: `data/raw-*` (earlier `train-*`), a superset with the same ids, and
the sources' files under `raw/` are skipped. `category` is the subset's leaderboard section
(chat, chat-hard, safety, reasoning; the prior sets' subsets -> prior-sets).

RewardBench 2 (allenai/reward-bench-2), where `chosen` and `rejected` are lists of completions,
gives one pair per (chosen, rejected) combination: ids `rewardbench-<id>-c<i>-r<j>`,
`meta.prompt_id` = the row's id (also `meta.split_group`: a prompt's pairs share one split role),
`subset` = its section (Factuality, Precise IF, Math, Safety, Focus, Ties).
"""
from __future__ import annotations

import os

from baer_fast.io.adapters import Imported
from baer_fast.io.adapters._conv import from_messages
from baer_fast.io.adapters._rows import chosen_rejected_pair, convert, files, rows, skipping, summary

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
    if isinstance(row.obj.get("chosen"), list):
        return _rb2_pairs(row, rid, question, subset)
    models = {k: {"model": row.obj[f"{k}_model"]} for k in ("chosen", "rejected")
              if isinstance(row.obj.get(f"{k}_model"), str)}
    return chosen_rejected_pair(f"rewardbench-{rid}", question, row.need("chosen"), row.need("rejected"),
                                chosen_meta=models.get("chosen"), rejected_meta=models.get("rejected"),
                                subset=subset, category=SECTION_OF.get(subset))


def _rb2_pairs(row, rid, question, subset: str) -> list:
    """RewardBench 2: lists of correct and incorrect completions -> one pair per (chosen, rejected)."""
    sides = {}
    for k in ("chosen", "rejected"):
        texts = row.need(k, list)
        if not texts or not all(isinstance(t, str) for t in texts):
            raise row.error("expected a non-empty list of completion strings (RewardBench 2)", k)
        sides[k] = texts
    meta = {"prompt_id": str(rid), "split_group": f"rewardbench-{rid}"}     # a prompt's pairs share a split
    return [chosen_rejected_pair(f"rewardbench-{rid}-c{i}-r{j}", question, c, r, meta=meta, subset=subset)
            for i, c in enumerate(sides["chosen"]) for j, r in enumerate(sides["rejected"])]


def load(src: str, *, rejects=None, options=None) -> Imported:
    # A snapshot of the hub dataset holds data/filtered-*.parquet, the superset it was cut from
    # (data/raw-*, earlier data/train-*; same ids) and the sources' files under raw/: beside a
    # filtered file, only filtered files are read.
    filtered = os.path.isdir(src) and any(os.path.basename(p).startswith("filtered") for p in files(src))
    keep, skipped = skipping(lambda path: filtered and not os.path.basename(path).startswith("filtered"))
    pairs, dropped = convert(rows(src, rejects, keep), _build, rejects)
    out = Imported(pairs, dropped=dropped)
    names = sorted(os.path.relpath(p, src) for p in skipped)
    shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
    out.notes.append(summary("rewardbench", pairs)
                     + (f"; read the filtered split, skipped {shown}" if skipped else ""))
    rb2 = {p.meta["prompt_id"] for p in pairs if "prompt_id" in p.meta}
    if rb2:
        out.notes.append(f"rewardbench: {len(rb2)} RewardBench 2 prompts gave "
                         f"{sum('prompt_id' in p.meta for p in pairs)} pairs, one per chosen x rejected "
                         "completion (meta.prompt_id groups them, and they share one split role); "
                         "eval --leaderboard rewardbench-2 counts a prompt right only when all its pairs are")
    unknown = sorted({p.subset for p in pairs if p.category is None and "prompt_id" not in p.meta})
    if unknown:
        out.notes.append(f"rewardbench: subsets outside the leaderboard's sections (no category): {', '.join(unknown)}")
    return out
