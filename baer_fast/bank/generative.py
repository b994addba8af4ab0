"""Generative experts: pairs in, canonical runs out — decode every reasoning, then read verdicts.

Two batched phases over a chunk of pairs: (1) every Generation of every (pair, expert) is one
decoder request, batched across pairs, experts and samples; one that depends on one candidate or
none is decoded once per pair and reused by both orders, and identical requests of several pairs
(pairs that share a question) once per call (_distinct); (2) every Verdict is read with the same
constrained readout as the single-pass experts: by the decoder as the row finishes (declared
cues), else as a token-id query through the engine. The single-pass prompts ride in phase 1 as
prompt reads where the decoder reads prompts; PAIRWISE_VERDICTS prompts start from the
decoder's exported [system][question][A][B] KV where the engine takes it.
Seeds hash (global seed, expert, sample index, the prompt's token ids; runtime/seeds.py): never
the pair id, the order's name or the batch, so a swapped pair's order-ba prompt draws the samples
of the original's order ab. The design in full: docs/architecture.md.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from baer_fast import protocols
from baer_fast.errors import InputError
from baer_fast.protocols.reasoning import Continue
from baer_fast.runtime.config import DECODER
from baer_fast.runtime.open import open_decoder
from baer_fast.runtime.queries import EngineStats, Query
from baer_fast.runtime.seeds import sample_seed

CUE_ROOM = 64        # context kept free after a generation for its cue (and the readout)


def recorded_settings(records, names) -> dict:
    """{generative expert: {"max_new_tokens", "seed"}} as the signals' meta.generation records them for
    the generative experts behind `names` (a native expert's is its generative one's): what a head
    fitted on them must decode with. InputError when the records disagree (merged runs)."""
    from baer_fast.errors import InputError

    want = {protocols.base_of(n) for n in names if n in protocols.GENERATIVE + protocols.NATIVE}
    seen: dict = {}
    for r in records:
        for e, g in ((r.meta or {}).get("generation") or {}).items():
            if e in want and isinstance(g, dict) and "max_new_tokens" in g:
                seen.setdefault(e, set()).add((int(g["max_new_tokens"]), int(g.get("seed", 0))))
    for e, values in seen.items():
        if len(values) > 1:
            raise InputError(f"the signals mix generation settings for {e} ({sorted(values)} as (max_new_tokens, "
                             "seed)): fit on the signals of one experts run", field="meta.generation")
    return {e: {"max_new_tokens": v[0], "seed": v[1]} for e, (v,) in sorted(seen.items())}


def recorded_budgets_seed(recorded: dict) -> tuple[dict, int]:
    """A head's `generation` ({expert: {max_new_tokens, seed}}) -> ({expert: budget}, the seed: the one
    they share, else 0)."""
    seeds = {r["seed"] for r in recorded.values()}
    return {e: r["max_new_tokens"] for e, r in recorded.items()}, seeds.pop() if len(seeds) == 1 else 0


@dataclass(frozen=True)
class GenerationConfig:
    max_new_tokens: dict = field(default_factory=dict)   # expert -> budget (else the protocol's default)
    seed: int = 0                                         # global seed of every sampled row
    max_rows: int = DECODER.max_rows                      # decode rows in flight at most...
    memory_budget_bytes: int = DECODER.memory_budget_bytes  # ...and as many as this much slot KV holds

    def budget(self, name: str) -> int:
        return int(self.max_new_tokens.get(name, protocols.get(name).MAX_NEW_TOKENS))

    def settings(self, name: str) -> dict:
        mod = protocols.get(name)
        return {"max_new_tokens": self.budget(name), "temperature": mod.TEMPERATURE, "top_p": mod.TOP_P,
                "samples": mod.SAMPLES, "seed": self.seed}


@dataclass
class ExpertCost:
    calls: int = 0               # generation requests (prefilled prompts), summed over pairs
    rows: int = 0                # decoded sequences (calls x samples)
    tokens_decoded: int = 0
    seconds: float = 0.0         # its share of decode and readout time

    def add(self, other: "ExpertCost") -> None:
        self.calls += other.calls
        self.rows += other.rows
        self.tokens_decoded += other.tokens_decoded
        self.seconds += other.seconds


@dataclass
class GenerativeReport:
    cost: dict = field(default_factory=dict)              # expert -> ExpertCost
    readout: EngineStats = field(default_factory=EngineStats)   # the engine calls reading verdicts (and extras)
    decode_prefilled: int | None = 0       # prompt tokens the decoder prefilled (None: its decoder does not say)
    decode_kv_peak: int | None = 0         # bytes of the decoder's KV slot buffers at most (None: it does not say)
    decode_naive: int = 0                  # the generation prompts' tokens, each prompt whole
    readout_naive: int = 0                 # the engine-read verdict queries' tokens, each whole

    def charge(self, name: str, cost: ExpertCost) -> None:
        self.cost.setdefault(name, ExpertCost()).add(cost)

    def lines(self) -> list[str]:
        return [f"  {name:<18} {c.calls:6d} generations {c.rows:6d} rows {c.tokens_decoded:9d} tokens decoded "
                f"{c.seconds:8.2f}s" for name, c in self.cost.items()]


@dataclass
class _Req:
    pair: int
    name: str
    key: str
    ids: tuple[int, ...]


def run_generative(engine, pairs, names: list[str], *, config: GenerationConfig = GenerationConfig(),
                   report: GenerativeReport | None = None, decoder=None, extra=None,
                   stats: EngineStats | None = None) -> list[dict]:
    """-> per pair {"runs": {expert: runs}, "meta": {expert: counters+settings}, "texts": {expert: {key: [str]}}}.

    engine: the readout engine (PrefixEngine, NaiveEngine, or the vLLM backend's); decoder:
    defaults to the engine's own (`engine.make_decoder`, the vLLM backend) else decode.Decoder on
    the engine's model (anything with `generate(list[GenRequest]) -> list[GenResult]`).
    extra: per pair, further queries (the single-pass bank's), whose log-probs come back as the
    row's "extra". They enter the decoder as prompt reads (decode.GenRequest.reads_prompt) beside
    the pair's generation prompts, so one prompt tree prefills their shared
    `[system][question][A][B]` for both. Where the decoder cannot read prompts (the vLLM
    backend's) or the engine is the naive reference, they are read in the same engine call as the
    verdicts instead. The engine call's stats are added to `report.readout` and to `stats` when
    given.
    """
    from baer_fast.bank.prompting import PromptEncoder
    from baer_fast.bank.queries import run_shared
    loaded = engine.loaded
    report = report if report is not None else GenerativeReport()
    enc = PromptEncoder.of(loaded)
    decoder = decoder or open_decoder(engine, config)
    reqs, requests = _requests(enc, pairs, names, config)
    extra = [list(e) for e in extra] if extra is not None else [[] for _ in pairs]
    # the extra queries ride in the decoder's prompt tree where it reads prompts and the engine
    # would share their prefixes too (not for the naive reference: every prompt whole)
    reads = any(extra) and decoder.reads_prompts and engine.shares_prefixes
    batch, gen_at, members = _with_reads(reqs, requests, extra) if reads else \
        (requests, None, _by_pair(reqs, len(pairs)))
    # KV of each pair's [system][question][A][B] per order, kept from the decoder's prefill for
    # the verdict prompts that embed generated text after it (rubric, PRePair), within the
    # engine's KV budget
    export = pairwise_prefixes(enc, pairs) if (
        any(getattr(protocols.get(n), "PAIRWISE_VERDICTS", False) for n in names)
        and decoder.exports_prefixes and engine.takes_prefix_kv) else None
    before = _prefilled(decoder)
    distinct, at = _distinct(batch)
    if not batch:
        results = []
    elif export:
        results = decoder.generate(distinct, export=_remapped(_exporters(batch, export, members), at),
                                   export_bytes=engine.config.kv_budget_bytes)
    else:
        results = decoder.generate(distinct)
    results = [results[j] for j in at]
    after = _prefilled(decoder)
    given = None
    if export:
        kept, decoder.exported = decoder.exported, {}
        given = [[(p, *kept[p]) for p in ps if p in kept] for ps in export]
    extra_lps = None
    if reads:
        extra_lps = [[results[k].verdicts[0] for k in mine[:len(e)]] for mine, e in zip(members, extra)]
        results = [results[k] for k in gen_at]
        extra = [[] for _ in pairs]                     # read already: nothing more for the engine
    report.decode_prefilled = None if None in (before, after, report.decode_prefilled) else \
        report.decode_prefilled + after - before
    kv = decoder.stats.kv_bytes_peak if decoder.stats is not None else None
    report.decode_kv_peak = None if None in (kv, report.decode_kv_peak) else max(kv, report.decode_kv_peak)
    gen_ids, texts = _trimmed(loaded.tokenizer, reqs, requests, results)
    groups, where, direct = _verdict_queries(enc, pairs, names, reqs, requests, results, gen_ids, texts)
    report.decode_naive += sum(len(r.prompt) for r in requests)
    report.readout_naive += sum(len(q.ids) for g in groups for q in g)
    both = [e + g for e, g in zip(extra, groups)]
    t0 = time.perf_counter()
    if any(both):
        lps, run_stats = run_shared(engine, pairs, both, given)
        report.readout.add(run_stats)
        if stats is not None:
            stats.add(run_stats)
    else:
        lps = [[] for _ in pairs]
    read_s = time.perf_counter() - t0
    logprobs = [lp[len(e):] for e, lp in zip(extra, lps)]
    read_tokens = sum(len(q.ids) for g in both for q in g) or 1
    sharing = _sharing([at[k] for k in gen_at] if reads else at)
    out = _assemble(pairs, names, config, reqs, requests, results, (groups, where, logprobs, direct), texts,
                    (read_s, read_tokens, sharing), report)
    if extra_lps is None:
        extra_lps = [lp[:len(e)] for e, lp in zip(extra, lps)]
    for i, (row, lp) in enumerate(zip(out, extra_lps)):
        row["extra"] = lp
        row["verdict_prompts"] = _verdict_prompts(groups[i], where[i], given[i] if given else ())
    return out


def _verdict_prompts(group, where, given) -> list[tuple]:
    """(ids, expert, leading tokens the decoder's handed-over prefix KV covers) of a pair's verdict
    prompts the engine read, for bank/costs.py (the generated text they embed is known only now). The
    engine uses a handed prefix that one of the prompts extends, for every prompt sharing its start."""
    from baer_fast.runtime.plan.prefix_tree import common_prefix
    ids = [q.ids for q in group]
    used = [p for p, *_ in given if any(len(q) > len(p) and q[:len(p)] == p for q in ids)]
    return [(q, name, max((common_prefix(q, p) for p in used), default=0)) for q, (name, _) in zip(ids, where)]


def pairwise_prefixes(enc, pairs) -> list[list[tuple[int, ...]]]:
    """Per pair, per display order: the token ids every prompt of the pairwise skeleton shares
    (template, system, question, both responses), whatever its instruction: the common prefix of
    two probes with different instructions."""
    from baer_fast.protocols.base import ORDERS, Prompt, pairwise_segments
    from baer_fast.runtime.plan.prefix_tree import common_prefix
    items = [(Prompt(o, pairwise_segments(p.question, p.response_a, p.response_b, o, probe), ("A", "B")), p.id, "probe")
             for p in pairs for o in ORDERS for probe in ("x", "y")]
    probes = iter(enc.encode_all(items))
    return [[tuple(a[:common_prefix(a, b)]) for a, b in ((next(probes), next(probes)) for _ in ORDERS)] for _ in pairs]


def _exporters(batch, export, members) -> dict:
    """{index in batch: prefixes}: for each pair's wanted prefix, the first of the pair's requests
    (members: per pair, its indices in batch) whose prompt extends it (none: not exported)."""
    out: dict[int, list] = {}
    for prefixes, mine in zip(export, members):
        for p in prefixes:
            at = next((k for k in mine if batch[k].prompt[:len(p)] == p), None)
            if at is not None:
                out.setdefault(at, []).append(p)
    return out


def _distinct(batch) -> tuple[list, list[int]]:
    """Each request decoded once per call: a generation that sees the question and one candidate or
    none (a reference solution or rubric for pairs that share a question, a PRePair analysis of a
    response that is in several pairs) is the same request for all of them, seeds included (they hash
    the prompt's ids), so one decode serves them all -> (the distinct requests in first-seen order,
    per request its index among them)."""
    first: dict = {}
    at = [first.setdefault(r, len(first)) for r in batch]
    return list(first), at


def _remapped(exporters: dict, at: list[int]) -> dict:
    """_exporters' {index in batch: prefixes} as {index among the distinct requests: prefixes}."""
    out: dict[int, list] = {}
    for k, prefixes in exporters.items():
        mine = out.setdefault(at[k], [])
        mine.extend(p for p in prefixes if p not in mine)
    return out


def _sharing(at: list[int]) -> list[tuple[int, int]]:
    """Per generation request: (its rank among the requests one decode serves, how many it serves)."""
    count: dict[int, int] = {}
    rank = []
    for j in at:
        rank.append(count.get(j, 0))
        count[j] = rank[-1] + 1
    return [(r, count[j]) for r, j in zip(rank, at)]


def _by_pair(reqs, n_pairs: int) -> list[list[int]]:
    """Per pair, the indices of its generation requests."""
    out: list[list[int]] = [[] for _ in range(n_pairs)]
    for k, r in enumerate(reqs):
        out[r.pair].append(k)
    return out


def _with_reads(reqs, requests, extra):
    """The generation requests with each pair's extra queries as prompt reads just before the
    pair's own generations, so they enter the decoder together and share one prompt tree
    -> (all requests, where each generation request went, per pair its indices: reads first)."""
    from baer_fast.runtime.decode import GenRequest
    batch, gen_at, members = [], [0] * len(requests), []
    for queries, mine in zip(extra, _by_pair(reqs, len(extra))):
        members.append([])
        for q in queries:
            members[-1].append(len(batch))
            batch.append(GenRequest(tuple(q.ids), 0, choices=tuple(q.choices)))
        for k in mine:
            gen_at[k] = len(batch)
            members[-1].append(len(batch))
            batch.append(requests[k])
    return batch, gen_at, members


def _prefilled(decoder) -> int | None:
    return decoder.stats.tokens_prefilled if decoder.stats is not None else None


def _requests(enc, pairs, names, config):
    from baer_fast.runtime.decode import GenRequest
    gens = [(i, pair, name, gen) for i, pair in enumerate(pairs) for name in names
            for gen in protocols.get(name).generations(pair.question, pair.response_a, pair.response_b)]
    all_ids = enc.encode_all((gen.prompt, pair.id, name) for _, pair, name, gen in gens)
    reqs, requests = [], []
    for (i, pair, name, gen), ids in zip(gens, all_ids):
        mod = protocols.get(name)
        room = enc.context_len - len(ids) - CUE_ROOM
        if room < 1:
            raise InputError(f"pair {pair.id!r}: the {name}/{gen.key} prompt ({len(ids)} tokens) leaves "
                             f"no room to generate in the context of {enc.model_name!r} "
                             f"({enc.context_len})", field="response_a")
        seeds = tuple(sample_seed(config.seed, name, s, ids) for s in range(gen.samples))
        cue = tuple(enc.tok.encode(gen.cue, add_special_tokens=False)) if gen.labels else ()
        requests.append(GenRequest(ids, min(config.budget(name), room), gen.samples, mod.TEMPERATURE,
                                   mod.TOP_P, seeds if mod.TEMPERATURE > 0 else (), tuple(mod.STOP), cue,
                                   enc.label_ids(gen.labels) if gen.labels else ()))
        reqs.append(_Req(i, name, gen.key, ids))
    return reqs, requests


def _trimmed(tok, reqs, requests, results):
    from baer_fast.runtime.decode import trim_generation
    gen_ids, texts = [], {}
    for r, req, res in zip(reqs, requests, results):
        ids = [trim_generation(tok, t, f, req.stop) for t, f in zip(res.tokens, res.finish)]
        gen_ids.append(ids)
        texts.setdefault(r.pair, {}).setdefault(r.name, {})[r.key] = [
            tok.decode(list(x), skip_special_tokens=True) for x in ids]
    return gen_ids, texts


def _finishes(reqs, results) -> dict:
    """{pair: {expert: {generation key: [finish reason per sample]}}} (native verdicts need them)."""
    out: dict = {}
    for r, res in zip(reqs, results):
        out.setdefault(r.pair, {}).setdefault(r.name, {})[r.key] = list(res.finish)
    return out


def _verdict_queries(enc, pairs, names, reqs, requests, results, gen_ids, texts):
    """-> engine query groups, their (expert, key) per pair, and {(pair, expert, key): log-probs}
    already read by the decoder."""
    by_key = {(r.pair, r.name, r.key): k for k, r in enumerate(reqs)}
    cue_ids: dict[str, tuple[int, ...]] = {}
    groups, where, direct, fresh = [], [], {}, []
    for i, pair in enumerate(pairs):
        group, locs = [], []
        for name in names:
            mod = protocols.get(name)
            for v in mod.verdicts(pair.question, pair.response_a, pair.response_b, texts.get(i, {}).get(name, {})):
                if isinstance(v, Continue):
                    k = by_key[(i, name, v.gen)]
                    if v.cue not in cue_ids:
                        cue_ids[v.cue] = tuple(enc.tok.encode(v.cue, add_special_tokens=False))
                    res, req = results[k], requests[k]
                    if (res.verdicts is not None and req.cue == cue_ids[v.cue]
                            and req.choices == enc.label_ids(v.labels)):
                        direct[(i, name, v.key)] = res.verdicts[v.sample]
                        continue
                    ids = reqs[k].ids + tuple(gen_ids[k][v.sample]) + cue_ids[v.cue]
                else:
                    ids = None                       # a fresh prompt: tokenized below, in one batch
                    fresh.append((i, len(group), (v, pair.id, name)))
                group.append(Query(ids, enc.label_ids(v.labels)))
                locs.append((name, v.key))
        groups.append(group)
        where.append(locs)
    for (i, j, _), ids in zip(fresh, enc.encode_all(item for _, _, item in fresh)):
        groups[i][j] = Query(ids, groups[i][j].choices)
    return groups, where, direct


def _assemble(pairs, names, config, reqs, requests, results, readout, texts, read_time, report):
    """read_time: (seconds of the engine call, tokens it read, _sharing of the generation requests):
    each verdict is charged its share. A decode that serves several requests (_distinct) is split
    among them as a shared prefill is (docs/cost.md): its tokens by an integer split, the remainder
    to the first in pair order, and its seconds equally; each pair still counts its own calls, while
    the run's totals (report) count the decode once."""
    groups, where, logprobs, direct = readout
    read_s, read_tokens, sharing = read_time
    finish = _finishes(reqs, results)
    mine = _by_pair(reqs, len(pairs))
    out = []
    for i, _ in enumerate(pairs):
        cost = {name: ExpertCost() for name in names}
        charged = {name: ExpertCost() for name in names}
        for k in mine[i]:
            req, res, (rank, m) = requests[k], results[k], sharing[k]
            tokens = sum(len(t) for t in res.tokens)
            share = ExpertCost(1, req.samples, tokens // m + (tokens % m if rank == 0 else 0), res.seconds / m)
            cost[reqs[k].name].add(share)
            charged[reqs[k].name].add(share if rank == 0 else ExpertCost(0, 0, share.tokens_decoded, share.seconds))
        lp_by: dict[str, dict] = {}
        for (p, name, key), lp in direct.items():
            if p == i:
                lp_by.setdefault(name, {})[key] = lp
        for (name, key), q, lp in zip(where[i], groups[i], logprobs[i]):
            lp_by.setdefault(name, {})[key] = lp
            cost[name].seconds += read_s * len(q.ids) / read_tokens
            charged[name].seconds += read_s * len(q.ids) / read_tokens
        runs = {name: protocols.get(name).runs(lp_by[name]) for name in names}
        for name in names:           # <name>_native: the verdict written in the same texts
            if hasattr(protocols.get(name), "native_runs"):
                runs[f"{name}_native"] = protocols.get(name).native_runs(
                    texts.get(i, {}).get(name, {}), finish.get(i, {}).get(name, {}), lp_by[name])
        meta = {name: {"calls": cost[name].calls, "tokens_decoded": cost[name].tokens_decoded,
                       **config.settings(name)} for name in names}
        for name in names:
            report.charge(name, charged[name])
        out.append({"runs": runs, "meta": meta, "texts": texts.get(i, {})})
    return out
