"""Chatbot Arena battles (lmsys/chatbot_arena_conversations) -> pairs; human votes are labels.

Records `{question_id, model_a, model_b, winner, conversation_a, conversation_b, turn, judge,
language, ...}`; winner `model_a` -> a, `model_b` -> b, `tie` and `tie (bothbad)` -> tie (kept,
excluded from accuracy; meta `tie_kind`). Model A stays a (the battle's own random order).
Conversations -> question and responses as in `_conv.split_pair`. Ids: `arena-<question_id>`.
"""
from __future__ import annotations

from baer_fast.io.adapters import Imported
from baer_fast.io.adapters._conv import check_winner, from_messages, split_pair
from baer_fast.io.adapters._rows import convert, rows, summary

WINNERS = {"model_a": "a", "model_b": "b", "tie": "tie", "tie (bothbad)": "tie"}


def battle_pair(row, pair_id: str, *, subset: str, category: str | None = None, turns: int | None = None):
    """A Pair from one battle row (conversation_a/b cut to `turns` user turns when given)."""
    from baer_fast.io.records import Pair

    label = check_winner(row, row.need("winner"), WINNERS)
    convs = [from_messages(row.need(f"conversation_{s}", list), row=row, field=f"conversation_{s}")
             for s in ("a", "b")]
    if turns is not None:
        convs = [c[:2 * turns] for c in convs]
    question, ra, rb, diverged = split_pair(*convs, row=row)
    meta = {"model_a": row.need("model_a"), "model_b": row.need("model_b")}
    for key in ("judge", "language", "turn"):
        if row.obj.get(key) is not None:
            meta[key] = row.obj[key]
    if row.obj["winner"].startswith("tie"):
        meta["tie_kind"] = row.obj["winner"]
    if diverged:
        meta["diverged"] = True
    return Pair(pair_id, question, ra, rb, label=label, subset=subset, category=category, meta=meta)


def _build(row):
    return battle_pair(row, f"arena-{row.need('question_id', (str, int))}", subset="arena")


def load(src: str, *, rejects=None, options=None) -> Imported:
    pairs, dropped = convert(rows(src, rejects), _build, rejects)
    out = Imported(pairs)
    out.notes.append(summary("arena", pairs, dropped))
    return out
