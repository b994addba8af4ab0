"""Chatbot Arena battles -> pairs; human votes are labels. Model A stays a (the battle's order).

lmsys/chatbot_arena_conversations: `{question_id, model_a, model_b, winner, conversation_a,
conversation_b, turn, judge, language, ...}`; winner `model_a` -> a, `model_b` -> b, `tie` and
`tie (bothbad)` -> tie (kept, excluded from accuracy; meta `tie_kind`). Ids `arena-<question_id>`.
lmsys-arena-human-preference-55k (Kaggle train.csv / test.csv): `{id, model_a, model_b, prompt,
response_a, response_b, winner_model_a, winner_model_b, winner_tie}`, the texts JSON lists with
one string per turn; exactly one winner column is 1, none at all (test.csv) leaves the pair
unlabelled; a battle with a null turn is dropped and counted. Ids `arena-<id>`.
Conversations -> question and responses as in `_conv.split_pair`. Battles of the same prompt
and model pair (either order) share `meta.split_group`, so they share one split role.
"""
from __future__ import annotations

import hashlib
import json

from baer_fast.io.adapters import Imported
from baer_fast.io.adapters._conv import check_winner, from_messages, merge, split_pair
from baer_fast.io.adapters._rows import convert, rows, summary
from baer_fast.io.jsonl import check_unicode, may_hold_surrogate

WINNERS = {"model_a": "a", "model_b": "b", "tie": "tie", "tie (bothbad)": "tie"}


def comparison_group(prefix: str, sides: list) -> str:
    """`meta.split_group` of a comparison: a hash of its two sides, each [model, its user turns...],
    in either order. Every vote or battle on the same prompt and model pair gets the same group, so
    fit never learns from a comparison that the test split holds again (splits.split_key)."""
    key = json.dumps(sorted(sides), ensure_ascii=False)
    return f"{prefix}-{hashlib.sha256(key.encode('utf-8', 'surrogatepass')).hexdigest()[:16]}"


def _users(conv) -> list:
    return [content for role, content in conv if role == "user"]


def battle_pair(row, pair_id: str, *, subset: str, category: str | None = None, turns: int | None = None,
                group: str | None = None):
    """A Pair from one battle row (conversation_a/b cut to `turns` user turns when given); `group`:
    its split group, by default `comparison_group` of the models and their user turns."""
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
    meta["split_group"] = group or comparison_group(
        "arena", [[meta["model_a"], *_users(convs[0])], [meta["model_b"], *_users(convs[1])]])
    return Pair(pair_id, question, ra, rb, label=label, subset=subset, category=category, meta=meta)


def _build(row):
    if "conversation_a" not in row.obj and "response_a" in row.obj:
        return _kaggle_pair(row)
    return battle_pair(row, f"arena-{row.need('question_id', (str, int))}", subset="arena")


KAGGLE_WINNERS = ("winner_model_a", "winner_model_b", "winner_tie")


def _turns(row, name: str) -> list:
    """A Kaggle cell: a JSON list of per-turn strings (text in the CSV), or the list itself."""
    cell = text = row.obj.get(name)
    if isinstance(text, str):
        try:
            cell = json.loads(text)
        except ValueError as e:
            raise row.error(f"expected a JSON list of per-turn strings: {e}", name) from None
    if not isinstance(cell, list) or not cell or not all(t is None or isinstance(t, str) for t in cell):
        raise row.error("expected a non-empty list of per-turn strings (null where a model did not answer)", name)
    if isinstance(text, str) and may_hold_surrogate(text):      # a list read as such was checked by its reader
        check_unicode(cell, path=row.path, line=row.line, field=name)
    return cell


def _kaggle_pair(row):
    from baer_fast.io.records import Pair

    prompt, ra, rb = (_turns(row, k) for k in ("prompt", "response_a", "response_b"))
    if not len(prompt) == len(ra) == len(rb):
        raise row.error(f"{len(prompt)} prompts for {len(ra)} and {len(rb)} responses: one of each per turn",
                        "response_a")
    if None in prompt or None in ra or None in rb:
        return "a turn is null (no answer)"
    label, meta = None, {}
    if any(k in row.obj for k in KAGGLE_WINNERS):
        flags = [str(row.need(k, (str, int))) for k in KAGGLE_WINNERS]
        if sorted(flags) != ["0", "0", "1"]:
            raise row.error(f"expected exactly one of {', '.join(KAGGLE_WINNERS)} to be 1, got {flags}", KAGGLE_WINNERS[0])
        label = ("a", "b", "tie")[flags.index("1")]
        if label == "tie":
            meta["tie_kind"] = "tie"
    for key in ("model_a", "model_b"):
        if isinstance(row.obj.get(key), str):
            meta[key] = row.obj[key]
    convs = [merge(t for q, r in zip(prompt, side) for t in (("user", q), ("assistant", r))) for side in (ra, rb)]
    question, a, b, diverged = split_pair(*convs, row=row, fields=("response_a", "response_b"))
    if diverged:
        meta["diverged"] = True
    # test.csv has no model names: its sides are told apart by their responses instead
    sides = [[meta[m], *prompt] if m in meta else ["", *prompt, *resp] for m, resp in (("model_a", ra), ("model_b", rb))]
    meta["split_group"] = comparison_group("arena", sides)
    return Pair(f"arena-{row.need('id', (str, int))}", question, a, b, label=label, subset="arena", meta=meta)


def load(src: str, *, rejects=None, options=None) -> Imported:
    pairs, dropped = convert(rows(src, rejects), _build, rejects)
    out = Imported(pairs, dropped=dropped)
    out.notes.append(summary("arena", pairs))
    return out
