"""run_experts: pairs in, Signals out — protocols -> token ids -> engine -> canonical runs.

The single-pass bank: prompt experts (direct, score, pointwise) are read from one prefix
tree per pair; derived experts (pride, calibraeval) transform the direct runs with
parameters fitted on non-test rows (or given, frozen) and returned as plain JSON. Runs
already computed (`given`, a cascade's first stage) are not computed again: a derived expert
whose source is among them is applied to them, at no cost beyond its source's.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from baer_fast import protocols
from baer_fast.bank.queries import build_all_queries, run_shared
from baer_fast.io.records import Pair, Signals
from baer_fast.io.text_stats import question_text
from baer_fast.protocols.base import snap
from baer_fast.io.splits import role, split_key
from baer_fast.io.text_stats import pair_meta as text_pair_meta
from baer_fast.runtime.config import EngineConfig
from baer_fast.runtime.open import HfOptions, open_engine
from baer_fast.runtime.queries import EngineStats


@dataclass
class RunReport:
    stats: EngineStats = field(default_factory=EngineStats)
    tokens_naive: int = 0                 # the prompt experts' tokens, one plain forward per prompt
    derived_params: dict = field(default_factory=dict)
    generative: object = None             # generative.GenerativeReport (cost per expert) once one ran

    def prefill_totals(self) -> tuple[int, int]:
        """(tokens prefilled, what one plain forward per prompt would prefill) over everything run:
        the engine's calls, and the decoder's generation prompts where the decoder counts them
        (the vLLM backend's does not; its prompts are then left out of both sides)."""
        shared, naive, g = self.stats.tokens_prefilled, self.tokens_naive, self.generative
        if g is not None:
            naive += g.readout_naive
            if g.decode_prefilled is not None:
                shared, naive = shared + g.decode_prefilled, naive + g.decode_naive
        return shared, naive


def resolve_experts(experts) -> list[str]:
    names = list(protocols.SINGLE_PASS if experts is None else experts)
    for name in names:
        protocols.get(name)          # raises on an unknown name
    return protocols.with_natives(names)


def expert_rows(engine, pairs: list[Pair], names, report: RunReport, generation=None, *,
                batch_invariant: bool = False) -> list[dict]:
    """Raw runs (before derived experts) and counters of every expert in `names`, one row per pair;
    non-finite runs are an error (check_finite). The engine computes the batch's distinct
    contents in canonical orientation and order (bank/canonical.py): swaps mirror exactly,
    duplicates agree, and ids and positions change nothing. batch_invariant: each distinct
    content in engine and decoder calls of its own (_one_by_one), so its floats do not
    depend on the other contents of the batch either.
    """
    from baer_fast.bank import canonical
    work, at = canonical.plan(pairs)
    rows = (_one_by_one if batch_invariant else _content_rows)(engine, work, names, report, generation)
    return canonical.restore(rows, pairs, at)


def _one_by_one(engine, work: list[Pair], names, report: RunReport, generation=None) -> list[dict]:
    """_content_rows of each content alone: its own engine calls and decoder call, so every
    forward's shapes (rows, padding, chunks, width groups, GEMM row counts) are its own. One
    decoder serves them all: a generate call's floats depend on its requests only. Refused on
    vLLM, whose prefix cache hands a call KV computed in earlier calls' batches."""
    if engine.kind == "vllm":
        from baer_fast.errors import BaerError
        raise BaerError("batch-invariant mode needs the hf backend (vLLM's prefix cache reuses KV computed "
                        "beside other pairs); drop --batch-invariant or use --backend hf")
    decoder = None
    if any(n in protocols.GENERATIVE for n in names):
        from baer_fast.bank.generative import GenerationConfig
        from baer_fast.runtime.open import open_decoder
        decoder = open_decoder(engine, generation or GenerationConfig())
    return [row for p in work for row in _content_rows(engine, [p], names, report, generation, decoder)]


def _content_rows(engine, pairs: list[Pair], names, report: RunReport, generation=None, decoder=None) -> list[dict]:
    """expert_rows over distinct pairs, in the order given.

    The prompt experts' queries are read in one engine call; with generative experts in `names`,
    they go to run_generative as `extra`: prompt reads in the decoder's prompt tree, so a pair's
    `[system][question][A][B]` is prefilled once for its generation prompts and them. decoder:
    the generative experts' (default: a fresh one from runtime/open.open_decoder).
    """
    from baer_fast.bank.prompting import PromptEncoder
    loaded = engine.loaded
    enc = PromptEncoder.of(loaded)
    built = build_all_queries(enc, pairs, protocols.prompt_experts_for(names))
    groups = [q for q, _ in built]
    gen = [n for n in names if n in protocols.GENERATIVE]
    if gen:
        from baer_fast.bank.generative import GenerationConfig, GenerativeReport, run_generative
        if report.generative is None:
            report.generative = GenerativeReport()
        out = run_generative(engine, pairs, gen, config=generation or GenerationConfig(), report=report.generative,
                             extra=groups, stats=report.stats, decoder=decoder)
        logprobs = [g.pop("extra") for g in out]
    else:
        out = None
        logprobs, stats = run_shared(engine, pairs, groups,
                                     store=engine.prefix_store if engine.takes_prefix_kv else None)
        report.stats.add(stats)
    # per pair: what its own prompts cost with sharing inside the pair (does not depend on which
    # other pairs came in the same batch); sharing across pairs shows in report.stats
    own = engine.plan_tokens(groups)
    naive = [sum(len(q.ids) for q in g) for g in groups]
    report.tokens_naive += sum(naive)
    rows = []
    for (_, where), lps, shared, plain in zip(built, logprobs, own, naive):
        by_expert: dict[str, dict] = {}
        for (name, key), lp in zip(where, lps):
            by_expert.setdefault(name, {})[key] = lp
        runs = {name: protocols.get(name).runs(lp) for name, lp in by_expert.items()}
        rows.append({"runs": runs, "tokens_prefilled": shared, "tokens_naive": plain})
    for row, g in zip(rows, out or ()):
        row["runs"].update(g["runs"])
        row["generation"], row["texts"], row["verdict_prompts"] = g["meta"], g["texts"], g["verdict_prompts"]
    check_finite(engine.loaded, pairs, rows)
    return rows


def check_finite(loaded, pairs: list[Pair], rows: list[dict]) -> None:
    """Every run is a probability: a NaN or infinite one means the judge's own numbers broke
    (fp16 overflow, broken weights), so the batch stops here, with nothing written for it, rather
    than handing a derived fit, a head or a reward NaN. Batches already written stay."""
    import math
    bad = [(p.id, name) for p, r in zip(pairs, rows) for name, runs in r["runs"].items()
           if any(u is not None and not math.isfinite(u) for u in runs)]
    if bad:
        from baer_fast.errors import BaerError
        shown = ", ".join(f"{pid} ({name})" for pid, name in bad[:5]) + (f" and {len(bad) - 5} more"
                                                                         if len(bad) > 5 else "")
        how = f" ({loaded.dtype}, {loaded.device})" if hasattr(loaded, "dtype") else ""
        raise BaerError(f"model {loaded.name!r}{how} produced non-finite verdict "
                        f"probabilities for {shown}; its logits overflowed or its weights are broken "
                        "(fp16 overflows often: load it in bfloat16 or float32)")


def _is_test(pair_like) -> bool:
    return role(split_key(pair_like), pair_like.split) == "test"


def fit_derived(rows: list, names: list[str]) -> dict:
    """rows: (record with .id/.split, runs dict) -> {expert: params}, fitted on non-test rows only."""
    params = {}
    for name in names:
        mod = protocols.get(name)
        fit_rows = [runs[mod.SOURCE] for rec, runs in rows if not _is_test(rec) and mod.SOURCE in runs]
        if not fit_rows:
            from baer_fast.errors import InputError
            raise InputError(f"{name}: no non-test pairs to fit its label-free parameters on; "
                             "pass frozen parameters (--derived-params) fitted on development pairs")
        params[name] = mod.fit(fit_rows)
    return params


def reusable(names, given) -> list[str]:
    """The derived experts of `names` whose source's runs are in `given` (runs already computed)."""
    from baer_fast.bank.costs import source_of
    return [n for n in names if n in protocols.DERIVED_EXPERTS and given and source_of(n) in given[0]]


def stage_experts(stage1, experts, own) -> tuple[list, list, list]:
    """A cascade's banks: stage 1's (`stage1`, resolved), stage 2's (the head's `experts` neither in
    stage 1's `own` nor run by it), and those of stage 2's it computes (not derived from stage 1's runs)."""
    first = resolve_experts(stage1)
    rest = resolve_experts([e for e in experts if e not in own and e not in first])
    reused = reusable(rest, [dict.fromkeys(first)])
    return first, rest, [n for n in rest if n not in reused]


def free_sources(names) -> list[str]:
    """`names`, then the sources of its derived experts (PriDe's direct): their prompts run for the
    derived expert anyway, so keeping their runs costs nothing (a cascade's stage 1 keeps them)."""
    from baer_fast.bank.costs import source_of
    extra = {s for n in names if n in protocols.DERIVED_EXPERTS and (s := source_of(n)) and s not in names}
    return list(names) + sorted(extra)


def with_given(rows: list[dict], given, names, reused, *, timed: bool = True) -> list[dict]:
    """Bank rows of `names` less `reused`, completed from `given` (per pair): the runs the reused
    derived experts read, and their cost cells as `counted` writes them (0, "from" the source)."""
    from baer_fast.bank.costs import free_cell
    out = []
    for row, runs in zip(rows, given):
        cost = row.get("expert_cost") or {}
        cells = {n: cost[n] if n in cost else free_cell(n, timed=timed) for n in names}
        out.append({**row, "runs": {**runs, **row["runs"]}, "expert_cost": cells})
    return out


def no_rows(n: int) -> list[dict]:
    """Rows of a bank run that computes nothing (every expert reused)."""
    return [{"runs": {}, "tokens_prefilled": 0, "tokens_naive": 0} for _ in range(n)]


def apply_derived(runs: dict, names: list[str], params: dict) -> dict:
    out = dict(runs)
    for name in names:
        mod = protocols.get(name)
        out[name] = [snap(u) for u in mod.apply(params[name], runs[mod.SOURCE])]   # exact under swap
    return out


def pair_meta(pair: Pair) -> dict:
    meta = text_pair_meta(pair.question, pair.response_a, pair.response_b)
    meta.update(len_q=len(question_text(pair.question)), len_a=len(pair.response_a), len_b=len(pair.response_b))
    return meta


def to_signals(pair: Pair, runs: dict, row: dict, names: list[str], engine_name: str) -> Signals:
    meta = {**pair.meta, **pair_meta(pair), "tokens_prefilled": row["tokens_prefilled"],
            "tokens_naive": row["tokens_naive"], "engine": engine_name}
    if "generation" in row:
        meta["generation"] = row["generation"]
    if "expert_cost" in row:
        meta["expert_cost"] = row["expert_cost"]
    if "prefill_shared" in row:
        meta["prefill_shared"] = row["prefill_shared"]
    return Signals(pair.id, {n: runs[n] for n in names}, pair.subset, pair.label, pair.split, meta,
                   category=pair.category)


def run_experts(model, pairs: list[Pair], *, experts=None, config: EngineConfig = EngineConfig(),
                derived_params: dict | None = None, naive: bool = False, report: RunReport | None = None,
                generation=None, batch_invariant: bool = False, given: list[dict] | None = None,
                **load_kw) -> list[Signals]:
    """Run the single-pass bank on `pairs` (both display orders) -> one Signals per pair.

    model: a local model directory, a LoadedModel, or an engine. Derived experts use
    `derived_params` when given, else are fitted on the non-test pairs here; the params used
    end up in `report.derived_params` (plain JSON for the head artifact). Generative experts
    (protocols.GENERATIVE, opt-in by name) decode with `generation` (a GenerationConfig).
    batch_invariant: each distinct pair in calls of its own (expert_rows), so its runs are the
    same bits whatever other pairs came with it. given: per pair, runs already computed (a
    cascade's first stage); a derived expert whose source is there is applied to it (reusable).
    """
    names = resolve_experts(experts)
    derived = [n for n in names if n in protocols.DERIVED_EXPERTS]
    reused = reusable(names, given)
    todo = [n for n in names if n not in reused]
    engine = open_engine(model, options=HfOptions(engine=config, naive=naive, **load_kw))
    report = report if report is not None else RunReport()
    from baer_fast.bank.costs import counted       # per-expert cost of each pair -> meta.expert_cost
    rows = counted(expert_rows, engine, pairs, todo, report, generation, batch_invariant=batch_invariant) \
        if todo else no_rows(len(pairs))
    if given:
        rows = with_given(rows, given, names, reused)
    if derived:
        report.derived_params = dict(derived_params) if derived_params else fit_derived(
            [(p, r["runs"]) for p, r in zip(pairs, rows)], derived)
    return [to_signals(p, apply_derived(r["runs"], derived, report.derived_params), r, names, engine.kind)
            for p, r in zip(pairs, rows)]
