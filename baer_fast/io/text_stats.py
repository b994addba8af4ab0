"""Surface statistics of one text (length and structure), stored in pair/signals meta.

Router features use only symmetric functions of the a/b values (min, max, |diff|),
never a-minus-b, so they stay candidate-invariant.
"""
from __future__ import annotations

import re

_LIST_ITEM = re.compile(r"^\s*(?:[-*+\u2022]|\d+[.)])\s+", re.MULTILINE)
STAT_NAMES = ("len", "code", "list", "digits")


def text_stats(text: str) -> dict:
    """{'len': characters, 'code': fenced code blocks, 'list': list items, 'digits': digit chars}."""
    return {"len": len(text), "code": text.count("```") // 2,
            "list": len(_LIST_ITEM.findall(text)), "digits": sum(c.isdigit() for c in text)}


def question_text(question) -> str:
    """All the text of a question (a string, or a conversation's turns joined by blank lines)."""
    return question if isinstance(question, str) else "\n\n".join(c for _, c in question)


def pair_meta(question, response_a: str, response_b: str) -> dict:
    """Flat meta for a pair: len_q (all the question's text) plus <stat>_a / <stat>_b for every stat."""
    meta = {"len_q": len(question_text(question))}
    for side, text in (("a", response_a), ("b", response_b)):
        for k, v in text_stats(text).items():
            meta[f"{k}_{side}"] = v
    return meta
