"""Token costs of published judge runs, estimated from the text they kept (LLMBar `results`).

The rule (docs/cost.md): a text costs ceil(UTF-8 bytes / 4) tokens. Per pair and protocol,
  decoded   = every generated text kept: each order's `completion`, earlier rounds'
              [text, finish_reason] items (metrics, reference answers, first Swap rounds),
              `score_1` / `score_2` ratings;
  prefilled = per generation call, TEMPLATE_TOKENS of instructions plus the text it shows:
              verdict calls the instruction and both outputs (and every earlier generated
              text of the item, which the protocol embeds), rating calls the instruction and
              one output, earlier rounds the instruction; a kept `prompt` is counted as is;
              k-shot protocols add k x the pair's own text for their examples.
The templates themselves are not in the published data, hence the fixed allowance.
"""
from __future__ import annotations

import math
import re

TEMPLATE_TOKENS = 200          # instructions of one prompt (the templates are not published with results)


def tokens(text) -> int:
    return math.ceil(len(str(text).encode("utf-8")) / 4) if text else 0


def _generated(x) -> bool:
    return isinstance(x, list) and len(x) == 2 and all(isinstance(t, (str, type(None))) for t in x)


def _shots(protocol: str) -> int:
    m = re.search(r"(\d+)shot", protocol)
    return int(m.group(1)) if m else 0


def llmbar_cost(item: dict, result: dict, protocol: str) -> dict | None:
    """{"prefilled", "decoded"} estimated tokens of one (pair, protocol) LLMBar result item; None when
    the item kept no generation to count (a copy stripped of its texts): no estimate, not 0 tokens."""
    q = tokens(item.get("input", ""))
    o1, o2 = tokens(item.get("output_1", "")), tokens(item.get("output_2", ""))
    shots = _shots(protocol) * (q + o1 + o2)
    pre = dec = earlier = calls = 0
    for step in result.get("results") or []:
        if _generated(step):                                   # a round before the verdict
            pre, dec = pre + TEMPLATE_TOKENS + q, dec + tokens(step[0])
            earlier, calls = earlier + tokens(step[0]), calls + 1
            continue
        if not isinstance(step, dict):
            continue
        for key, shown in (("score_1", o1), ("score_2", o2)):
            if _generated(step.get(key)):
                pre, dec = pre + TEMPLATE_TOKENS + q + shown + shots, dec + tokens(step[key][0])
                calls += 1
        for order in ("swap = False", "swap = True"):
            call = step.get(order) or {}
            if _generated(call.get("completion")):
                shown = tokens(call["prompt"]) if "prompt" in call else TEMPLATE_TOKENS + q + o1 + o2 + earlier + shots
                pre, dec, calls = pre + shown, dec + tokens(call["completion"][0]), calls + 1
    return {"prefilled": pre, "decoded": dec} if calls else None
