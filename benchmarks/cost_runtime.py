"""The runtime bank of cost_accuracy.py: `baer-fast experts --experts all` run by a random-weight judge.

The judge is the CPU benchmarks' anchor model (random_judge.build_anchor_dir): Qwen3 architecture,
4 layers, RANDOM weights. Its verdicts are near chance, so the accuracies of this bank say nothing;
what it shows is the cost side: the per-expert tokens `experts` MEASURED for each pair
(meta.expert_cost, bank/costs.py) flowing through pruning and the cascade. The pairs are the
labelled LLMBar Natural sample the demo ships. Generations are capped (16 tokens by default) to
keep the run cheap. The signals file is cached under a folder named by the settings; a rerun
reads it and skips the model.
"""
from __future__ import annotations

import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
NAME = "Runtime-anchor"          # the source's name in cost_accuracy.py (selectable with --only)


def cache_path(cache_dir: str, *, n_pairs: int, max_new_tokens: int, experts: str) -> str:
    # v2: records carry meta.prefill_shared (a subset pays its shared prompt prefixes whole); v3: each call's
    # prompt trees priced, the verdict reads after the generations included; older caches are not read
    tag = f"v3-n{n_pairs}-t{max_new_tokens}-{experts.replace(',', '+')}"
    return os.path.join(cache_dir, tag, "signals.jsonl")


def complete(path: str, ids: list[str]) -> bool:
    """The cached signals file holds every pair (a finished `experts` run writes it at the end)."""
    from baer_fast.io.records import read_signals
    return os.path.exists(path) and {s.id for s in read_signals(path)} == set(ids)


def run_bank(model_dir: str, pairs: list, out: str, *, max_new_tokens: int, experts: str, chunk: int = 16) -> None:
    """The whole bank as `baer-fast experts --experts EXPERTS --max-new-tokens N --seed 0` runs
    it (chunks of distinct contents, derived experts fitted on all non-test pairs at the end), through the
    runner's calls with meta.expert_cost filled in as run_experts fills it (bank/costs.counted; the
    command's writer records none). Written to `out` atomically."""
    from baer_fast import protocols
    from baer_fast.bank import costs, runner
    from baer_fast.bank.canonical import chunks
    from baer_fast.bank.generative import GenerationConfig
    from baer_fast.io.records import write_signals
    from baer_fast.runtime.open import open_engine
    names = runner.resolve_experts(list(protocols.ALL) if experts == "all" else experts.split(","))
    derived = [n for n in names if n in protocols.DERIVED_EXPERTS]
    gen = GenerationConfig(max_new_tokens={g: max_new_tokens for g in protocols.GENERATIVE}, seed=0)
    engine, report, t0 = open_engine(model_dir), runner.RunReport(), time.perf_counter()
    done = {}
    for part in chunks(pairs, chunk):     # as the command chunks (--chunk-pairs 16)
        for p, row in zip(part, costs.counted(runner.expert_rows, engine, part, names, report, gen)):
            done[p.id] = row
    rows = [done[p.id] for p in pairs]
    params = runner.fit_derived([(p, r["runs"]) for p, r in zip(pairs, rows)], derived) if derived else {}
    signals = [runner.to_signals(p, runner.apply_derived(r["runs"], derived, params), r, names, engine.kind)
               for p, r in zip(pairs, rows)]
    print(f"{NAME}: {len(pairs)} pairs in {time.perf_counter() - t0:.1f}s, {report.prefill_totals()[0]} tokens "
          "prefilled", file=sys.stderr)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    write_signals(out + ".part", signals)
    os.replace(out + ".part", out)


def runtime_records(cache_dir: str, *, pairs: list | None = None, n_pairs: int | None = None,
                    max_new_tokens: int = 16, experts: str = "all", model_dir: str | None = None) -> list:
    """Signals of the runtime bank on `pairs` (default: the demo's LLMBar Natural sample, first
    n_pairs), from the cache when complete, else run by `model_dir` (default: the anchor model)."""
    from baer_fast.io.records import read_signals
    if pairs is None:
        from baer_fast.commands.demo import sample_pairs
        pairs = sample_pairs(n_pairs)
    path = cache_path(cache_dir, n_pairs=len(pairs), max_new_tokens=max_new_tokens, experts=experts)
    if not complete(path, [p.id for p in pairs]):
        if model_dir is None:
            sys.path.insert(0, HERE)
            from random_judge import build_anchor_dir
            model_dir = build_anchor_dir(os.path.join(cache_dir, "anchor-model"))
        print(f"{NAME}: running the bank ({experts}, {max_new_tokens}-token generations) on {len(pairs)} pairs "
              f"-> {path}", file=sys.stderr)
        run_bank(model_dir, pairs, path, max_new_tokens=max_new_tokens, experts=experts)
    return read_signals(path)


def replay(records: list, reads: bool = True):
    """run(pairs, experts) for selection/cascade.run_staged from recorded signals: what the runtime
    would run for `experts` (a native expert brings its generative one), with their recorded costs,
    plus, in a cell of its own, the parts of shared prompt prefixes the cells leave out (a stage runs
    them whole; stage 2 reads stage 1's where `reads`, as Judge runs single-pass stages, and prefills
    them again where a stage generates text: the artifact's stage2_reads_stage1_prefixes)."""
    from dataclasses import replace

    from baer_fast.bank.runner import resolve_experts
    from baer_fast.selection.costs import shared_costs
    by_id = {r.id: r for r in records}

    def run(pairs, experts, given=None):         # given: stage 1's runs
        keep = set(resolve_experts(list(experts)))
        out = []
        for p, before in zip(pairs, given or [None] * len(pairs)):
            r = by_id[p.id]
            cost = {k: v for k, v in (r.meta.get("expert_cost") or {}).items() if k in keep}
            shared = shared_costs([r])
            if shared is not None:
                base = set(closure(before)) if before and reads else set()
                extra = shared.extra(base | set(closure(keep))) - (shared.extra(base) if base else 0.0)
                cost[f"(shared prefixes, stage {2 if before else 1})"] = {"prefilled": extra, "decoded": 0}
            out.append(replace(r, experts={k: v for k, v in r.experts.items() if k in keep},
                               meta={**r.meta, "expert_cost": cost}))
        return out
    return run



def closure(experts) -> list[str]:
    """What the runtime runs for `experts`: a native expert brings its generative one (with_natives),
    a derived one its source's prompts (charged to the source when it is in the bank)."""
    from baer_fast import protocols
    from baer_fast.bank.runner import resolve_experts
    names = resolve_experts(list(experts))
    return sorted(set(names) | {protocols.get(n).SOURCE for n in names if n in protocols.DERIVED_EXPERTS})
