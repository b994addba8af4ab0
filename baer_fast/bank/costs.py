"""Per-expert cost of one bank run: what each pair's experts prefilled, decoded and took.

Hooked around the runner's `expert_rows` (`counted`); writes row["expert_cost"] = {expert:
{"prefilled", "decoded", "seconds"}} (-> `meta.expert_cost`). Rule (docs/cost.md): prefill — each
call's prompt trees are rebuilt from the same ids (the engine's: pairs of one question merged; the
decoder's: one over the call, the single-pass prompts riding in it; the engine's verdict reads after
the generations), each node's tokens split equally (integer split, remainder to the first in (pair,
expert) order) among the (pair, expert)s with a prompt through it (the naive engine charges each
prompt whole), then fitted to the run's counters by largest remainder, so they sum to them exactly.
decoded — each expert's own generated tokens. seconds — wall time in proportion to both. A derived
expert costs nothing beyond its source; where the source is in the bank its cell names it ("from").
row["prefill_shared"] = [[tokens, [experts]], ...]: the pair's part of the nodes several of its experts
pass through, by expert set, and each cell's "shared": its parts of them (a subset keeping some of a
set's experts still prefills all of it: selection/costs.subset_cost).
"""
from __future__ import annotations

import time

from baer_fast import protocols


def counted(expert_rows, engine, pairs, names, report, generation=None, *, timed: bool = True, **kw) -> list[dict]:
    """expert_rows(engine, pairs, names, report, generation, **kw) with row["expert_cost"] filled in.
    timed=False leaves out "seconds" (wall time), so the rows are the same bytes run to run: the
    `experts` command's files must be (a resumed run equals the uninterrupted one)."""
    t0, before = time.perf_counter(), _prefilled(report)
    rows = expert_rows(engine, pairs, names, report, generation, **kw)
    seconds, spent = time.perf_counter() - t0, _prefilled(report) - before
    reads = [row.pop("verdict_prompts", ()) for row in rows]
    weights, shared = prefill_shares(engine, pairs, names, generation, reads)
    prefilled = fit_to_total(weights, spent)
    scale = spent / max(sum(v for d in weights for v in d.values()), 1)      # 1 where the shares are the counts
    sets, parts = _shared_cells(shared, scale)
    decoded = [{n: int(((row.get("generation") or {}).get(n) or {}).get("tokens_decoded", 0)) for n in names}
               for row in rows]
    work = sum(prefilled[i].get(n, 0) + decoded[i][n] for i in range(len(rows)) for n in names) or 1
    for i, row in enumerate(rows):
        row["expert_cost"] = {n: {"prefilled": prefilled[i].get(n, 0), "decoded": decoded[i][n]} for n in names}
        for n in names:
            if timed:
                row["expert_cost"][n]["seconds"] = seconds * (prefilled[i].get(n, 0) + decoded[i][n]) / work
            if source_of(n) in names:        # costs 0 here, but needs its source run: fit --budget adds it
                row["expert_cost"][n]["from"] = source_of(n)
            if parts[i].get(n):
                row["expert_cost"][n]["shared"] = parts[i][n]
        if sets[i]:
            row["prefill_shared"] = [[t, list(e)] for e, t in sorted(sets[i].items())]
    return rows


def _shared_cells(shared: list[dict], scale: float) -> tuple[list[dict], list[dict]]:
    """Per pair, {experts: tokens} and {expert: tokens} from its {(experts, expert): tokens}, each part
    rescaled and rounded once, so the two add up to the same total (a subset of all experts adds 0)."""
    sets, parts = [dict() for _ in shared], [dict() for _ in shared]
    for i, cells in enumerate(shared):
        for (key, name), t in sorted(cells.items()):
            r = round(t * scale)
            sets[i][key] = sets[i].get(key, 0) + r
            parts[i][name] = parts[i].get(name, 0) + r
    return sets, parts


def with_derived(cost: dict, names) -> dict:
    """meta.expert_cost of a bank run made without its derived experts (the `experts` command's raw
    phase), completed for `names` as `counted` writes it: a derived expert whose source is in
    `names` costs 0 and names it ("from"); one whose source is not takes the source's cell."""
    out = {n: dict(c) for n, c in cost.items() if n in names}
    for n in names:
        source = source_of(n)
        if n in out or n not in protocols.DERIVED_EXPERTS or source is None or source not in cost:
            continue
        out[n] = free_cell(n) if source in names else dict(cost[source])
    return out


def with_derived_meta(meta: dict, names) -> dict:
    """A raw run's meta completed for `names` (with_derived): a derived expert that takes its absent
    source's cell also takes its place in `prefill_shared`'s expert sets."""
    cost = with_derived(meta["expert_cost"], names)
    took = {source_of(n): n for n in names if n in protocols.DERIVED_EXPERTS and source_of(n) not in names
            and source_of(n) in meta["expert_cost"]}
    out = {**meta, "expert_cost": cost}
    if took and meta.get("prefill_shared"):
        out["prefill_shared"] = [[t, sorted(took.get(e, e) for e in experts)] for t, experts in meta["prefill_shared"]]
    return out


def free_cell(name: str, *, timed: bool = False) -> dict:
    """The cost cell of an expert whose runs come with its source's: nothing, "from" the source."""
    return {"prefilled": 0, "decoded": 0, **({"seconds": 0.0} if timed else {}), "from": source_of(name)}


def source_of(name: str) -> str | None:
    """The bank expert whose output `name` is computed from (a native verdict: its generative
    expert's texts; PriDe, CalibraEval: their source's runs), else None."""
    if name in protocols.NATIVE:
        return protocols.base_of(name)
    if name in protocols.DERIVED_EXPERTS:
        source = protocols.prompt_experts_for([name])[0]
        return source if source != name else None       # CalibraEval reads prompts of its own
    return None


def _prefilled(report) -> int:
    g = report.generative
    return report.stats.tokens_prefilled + (int(g.decode_prefilled or 0) if g is not None else 0)


def owners(names) -> dict:
    """prompt expert -> the bank expert charged for its prompts."""
    out = {}
    for n in names:
        for p in protocols.prompt_experts_for([n]):
            out.setdefault(p, p if p in names else n)
    return out


def tagged_prompts(engine, pairs, names, generation, reads=None) -> list[list[tuple]]:
    """Per pair, (token ids, expert charged, call, leading tokens computed in another call) of every
    prompt the bank prefills for it: call 1 the engine's or decoder's first call (the single-pass prompts
    ride in the decoder's tree), call 2 the engine's read of the verdicts after the generations. reads:
    per pair, (ids, expert, covered) of those verdict prompts (they embed the generated text: only the
    run knows them); their first `covered` tokens come as KV the decoder prefilled, so they join call 1."""
    from baer_fast.bank.prompting import PromptEncoder
    from baer_fast.bank.queries import build_all_queries
    enc = PromptEncoder.of(engine.loaded)
    who = owners(names)
    built = build_all_queries(enc, pairs, list(who))
    out = [[(q.ids, who[name], 1, 0) for q, (name, _) in zip(qs, where)] for qs, where in built]
    gen = [n for n in names if n in protocols.GENERATIVE]
    if gen:
        from baer_fast.bank.generative import GenerationConfig, _requests
        reqs, _ = _requests(enc, pairs, gen, generation or GenerationConfig())
        for r in reqs:
            out[r.pair].append((r.ids, r.name, 1, 0))
    for mine, verdicts in zip(out, reads or ()):
        for ids, name, covered in verdicts:
            if covered:
                mine.append((tuple(ids[:covered]), name, 1, 0))
            mine.append((tuple(ids), name, 2, covered))
    return out


def prefill_shares(engine, pairs, names, generation=None, reads=None) -> tuple[list[dict], list[dict]]:
    """-> per pair: {expert: tokens} by the node-splitting rule; {(experts, expert): tokens}: each
    expert's parts of the nodes several of the pair's experts pass through (experts: their sorted tuple).
    reads: per pair, the generative experts' verdict prompts (tagged_prompts)."""
    from baer_fast.runtime.plan.prefix_tree import ancestors, build_tree
    from baer_fast.bank.queries import share_questions
    tagged = tagged_prompts(engine, pairs, names, generation, reads)
    out, shared = [dict() for _ in pairs], [dict() for _ in pairs]
    if not getattr(engine, "shares_prefixes", True):
        for i, items in enumerate(tagged):
            for ids, name, call, covered in items:
                out[i][name] = out[i].get(name, 0) + len(ids) - covered
        return out, shared
    items = [[(i, t) for t in mine] for i, mine in enumerate(tagged)]
    merged, _ = share_questions(pairs, items)
    # call 1 is the decoder's where a generative expert runs: one prompt tree over the call's prompts
    # (the template's start is shared across questions); the engine's calls merge pairs per question
    calls = [[x for mine in items for x in mine if x[1][2] == 1]] if any(n in protocols.GENERATIVE for n in names) \
        else [[x for x in m if x[1][2] == 1] for m in merged]
    for group in filter(None, calls + [[x for x in m if x[1][2] == 2] for m in merged]):
        nodes = build_tree([ids for _, (ids, *_) in group])
        through: dict[int, set] = {}
        covered: dict[int, int] = {}          # node -> leading tokens of its prompts computed in call 1
        for x, nd in enumerate(nodes):
            for j in nd.ends:
                i, (_, name, _, c) = group[j]
                for a in ancestors(nodes, x) + [x]:
                    through.setdefault(a, set()).add((i, name))
                    covered[a] = min(covered.get(a, c), c)
        for a, who in through.items():
            nd = nodes[a]
            tokens = len(nd.tokens) - min(max(covered[a] - nd.past, 0), len(nd.tokens))
            if not tokens:
                continue
            share, extra = divmod(tokens, len(who))
            mine: dict[int, list] = {}
            for k, (i, name) in enumerate(sorted(who)):
                out[i][name] = out[i].get(name, 0) + share + (k < extra)
                mine.setdefault(i, []).append((name, share + (k < extra)))
            for i, cells in mine.items():
                if len(cells) > 1:
                    key = tuple(sorted(n for n, _ in cells))
                    for n, t in cells:
                        shared[i][(key, n)] = shared[i].get((key, n), 0) + t
    return out, shared


def fit_to_total(weights: list[dict], total: int) -> list[dict]:
    """Integer shares proportional to `weights` summing to `total` (largest remainder; ties in
    (pair, expert) order). Unchanged when the weights already sum to `total`."""
    cells = [(i, n, w) for i, d in enumerate(weights) for n, w in sorted(d.items())]
    have = sum(w for _, _, w in cells)
    if have == total or not cells:
        return [dict(d) for d in weights]
    exact = [total * w / have if have else total / len(cells) for _, _, w in cells]
    base = [int(x) for x in exact]
    order = sorted(range(len(cells)), key=lambda k: (-(exact[k] - base[k]), k))
    for k in order[:total - sum(base)]:
        base[k] += 1
    out = [dict() for _ in weights]
    for (i, n, _), b in zip(cells, base):
        out[i][n] = b
    return out
