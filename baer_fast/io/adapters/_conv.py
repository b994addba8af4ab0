"""Conversations of the multi-turn sources -> (question, response a, response b).

Turns are (role, content) with roles "user"/"assistant"; consecutive turns of one role are
merged (blank line between), as HH-RLHF sometimes splits one reply. Two conversations that
answer the same user turns share everything up to their last common user turn: that prefix
is the question (a plain string when it is one turn), and what follows is each response. Where
the two differ before their final reply (MT-Bench's second turn, where each model's first
answer precedes it; a few HH-RLHF rows), the rest of each conversation is its response, later
turns written out as "User: ..." / "Assistant: ...".
"""
from __future__ import annotations

import re

from baer_fast.errors import InputError

_ROLE = {"user": "user", "human": "user", "assistant": "assistant", "gpt": "assistant", "bot": "assistant"}
_HH_TURN = re.compile(r"\n\n(Human|Assistant): ?")


def merge(turns) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for role, content in turns:
        if out and out[-1][0] == role:
            out[-1] = (role, f"{out[-1][1]}\n\n{content}")
        else:
            out.append((role, content))
    return out


def from_messages(messages, *, row, field: str) -> list[tuple[str, str]]:
    """[{role, content}] (OpenAI/FastChat style) -> merged turns; a located error if malformed."""
    if not isinstance(messages, list) or not messages:
        raise row.error("expected a non-empty list of {role, content} messages", field)
    turns = []
    for i, m in enumerate(messages):
        role = _ROLE.get(str(m.get("role", "")).lower()) if isinstance(m, dict) else None
        if role is None or not isinstance(m.get("content"), str):
            raise row.error(f"message {i}: expected {{role: user|assistant, content: str}}, got {m!r:.80}", field)
        turns.append((role, m["content"]))
    return merge(turns)


def from_hh(text: str, *, row, field: str) -> list[tuple[str, str]]:
    """An HH-RLHF transcript ("\\n\\nHuman: ...\\n\\nAssistant: ...") -> merged turns."""
    parts = _HH_TURN.split(text)
    if parts[0].strip() or len(parts) < 3:
        raise row.error('expected a transcript of "\\n\\nHuman: ..." / "\\n\\nAssistant: ..." turns', field)
    return merge((_ROLE[r.lower()], c) for r, c in zip(parts[1::2], parts[2::2]))


def render_tail(turns) -> str:
    """A response that runs on past one reply: its first reply, then the later turns labelled."""
    text = turns[0][1]
    for role, content in turns[1:]:
        text += f"\n\n{'User' if role == 'user' else 'Assistant'}: {content}"
    return text


def split_pair(conv_a, conv_b, *, row, fields=("conversation_a", "conversation_b")) -> tuple[object, str, str, bool]:
    """(question, response a, response b, diverged) from two conversations of the same user turns;
    `fields` name the two in errors."""
    for field, conv in zip(fields, (conv_a, conv_b)):
        if conv[-1][0] != "assistant":
            raise row.error("the conversation ends with a user turn: there is no response to judge", field)
    common = 0
    while common < min(len(conv_a), len(conv_b)) - 1 and conv_a[common] == conv_b[common]:
        common += 1
    while common > 0 and conv_a[common - 1][0] != "user":
        common -= 1
    if common == 0:
        raise row.error("the two conversations do not open with the same user turn", fields[0])
    history, tail_a, tail_b = conv_a[:common], conv_a[common:], conv_b[common:]
    question = history[0][1] if len(history) == 1 else tuple(history)
    diverged = len(tail_a) > 1 or len(tail_b) > 1
    return question, render_tail(tail_a), render_tail(tail_b), diverged


def check_winner(row, value, table: dict, field: str = "winner") -> str:
    if value not in table:
        raise InputError(f"{value!r} is not one of {', '.join(map(repr, table))}", path=row.path,
                         line=row.line, field=field)
    return table[value]
