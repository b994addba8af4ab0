"""Expert protocols: prompt segments, verdict label sets, and runs -> canonical u. No torch.

Prompt experts expose `NAME`, `LABELS`, `prompts(question, a, b) -> list[Prompt]` and
`runs(logprobs_by_key) -> list[u]`. Derived experts (PriDe, CalibraEval) expose `SOURCE`
(the prompt expert whose runs they transform), `fit(rows) -> params dict` and
`apply(params, runs) -> runs`; their parameters are fitted on non-test rows and frozen.
Generative experts (cot, self_consistency, rubric, prepair, deliberate, reference) declare
generations and verdict readouts (see `reasoning.py`) and run in `bank/generative.py`;
cot, self_consistency and deliberate also give `<name>_native` (NATIVE): the verdict parsed
from the same generated texts as the protocol instructs, None where none was written.
"""
from __future__ import annotations

import importlib

PROMPT_EXPERTS = ("direct", "score", "pointwise")
DERIVED_EXPERTS = ("pride", "calibraeval")
SINGLE_PASS = PROMPT_EXPERTS + DERIVED_EXPERTS
GENERATIVE = ("cot", "self_consistency", "rubric", "prepair", "deliberate", "reference")
# the verdict each of these writes in its own text (their modules' native_runs), emitted with them
NATIVE = ("cot_native", "self_consistency_native", "deliberate_native")
ALL = SINGLE_PASS + GENERATIVE + NATIVE


def get(name: str):
    """The protocol module of an expert (a native expert's is its generative expert's)."""
    if name not in ALL:
        raise ValueError(f"unknown expert {name!r} (single-pass experts: {', '.join(SINGLE_PASS)}; "
                         f"generative experts: {', '.join(GENERATIVE)}; native: {', '.join(NATIVE)})")
    return importlib.import_module(f"baer_fast.protocols.{base_of(name)}")


def check_runnable(experts, runner: str, path: str | None = None) -> None:
    """A head's experts must be protocols this library runs (an imported bank's, e.g. LLMBar's 'CoT', are
    not): InputError naming the first that is not (and the head's file, `path`), before any model is loaded."""
    from baer_fast.errors import InputError

    unknown = [e for e in experts if e not in ALL]
    if unknown:
        raise InputError(f"the head uses expert {unknown[0]!r}, which {runner} cannot run (runnable: "
                         f"{', '.join(ALL)}); fit the head on signals produced by `baer-fast experts`",
                         path=path, field="experts")


def base_of(name: str) -> str:
    """The expert that produces `name`'s runs: itself, or for a native expert its generative one."""
    return name[: -len("_native")] if name in NATIVE else name


def with_natives(names) -> list[str]:
    """`names` with each native expert's generative expert (which produces it) and each native
    expert of a generative one asked for (it comes from the same texts, at no cost)."""
    out: list[str] = []
    for name in names:
        for n in ((base_of(name), name) if name in NATIVE else (name, f"{name}_native")):
            if n in ALL and n not in out:
                out.append(n)
    return out


def prompt_experts_for(names) -> list[str]:
    """The prompt experts needed to produce `names` (derived experts need their source)."""
    need = []
    for name in names:
        if name in GENERATIVE or name in NATIVE:
            continue
        mod = get(name)
        base = getattr(mod, "SOURCE", name)
        if base not in need:
            need.append(base)
    return need
