"""Expert protocols: prompt segments, verdict label sets, and runs -> canonical u. No torch.

Prompt experts expose `NAME`, `LABELS`, `prompts(question, a, b) -> list[Prompt]` and
`runs(logprobs_by_key) -> list[u]`. Derived experts (PriDe, CalibraEval) expose `SOURCE`
(the prompt expert whose runs they transform), `fit(rows) -> params dict` and
`apply(params, runs) -> runs`; their parameters are fitted on non-test rows and frozen.
Generative experts (cot, self_consistency, rubric, prepair, deliberate, reference) declare
generations and verdict readouts (see `reasoning.py`) and run in `runtime/generative.py`.
"""
from __future__ import annotations

import importlib

PROMPT_EXPERTS = ("direct", "score", "pointwise")
DERIVED_EXPERTS = ("pride", "calibraeval")
SINGLE_PASS = PROMPT_EXPERTS + DERIVED_EXPERTS
GENERATIVE = ("cot", "self_consistency", "rubric", "prepair", "deliberate", "reference")
ALL = SINGLE_PASS + GENERATIVE


def get(name: str):
    if name not in ALL:
        raise ValueError(f"unknown expert {name!r} (single-pass experts: {', '.join(SINGLE_PASS)}; "
                         f"generative experts: {', '.join(GENERATIVE)})")
    return importlib.import_module(f"baer_fast.protocols.{name}")


def prompt_experts_for(names) -> list[str]:
    """The prompt experts needed to produce `names` (derived experts need their source)."""
    need = []
    for name in names:
        if name in GENERATIVE:
            continue
        mod = get(name)
        base = getattr(mod, "SOURCE", name)
        if base not in need:
            need.append(base)
    return need
