"""Generative experts end to end on a tiny model: symmetry, determinism, counting, budgets."""
import math

import pytest

from baer_fast import protocols
from baer_fast.bank.generative import GenerationConfig, GenerativeReport, run_generative
from baer_fast.bank.runner import RunReport, run_experts
from baer_fast.runtime.open import open_engine
from tests.fixtures.tolerances import (HEAD_OPS, fp64_tol, naive_logprob_error, naive_run_error, paths_tol,
                                       readout_tol)
from tests.fixtures.prompts import pairs as make_pairs

BUDGET = 8
GEN = GenerationConfig(max_new_tokens={n: BUDGET for n in protocols.GENERATIVE}, seed=7)
ALL_GEN = list(protocols.GENERATIVE)


@pytest.fixture(scope="module")
def bank(qwen):
    ps = make_pairs(4, seed=1)
    report = RunReport()
    return ps, run_experts(qwen, ps, experts=ALL_GEN, generation=GEN, report=report), report


def test_swapped_pairs_give_mirrored_runs(qwen, bank):
    """Every generative expert, including the sampled one: the swapped pair's order-ba prompt is
    the original's order-ab prompt, so its seed and samples are the same. The swapped pairs run
    in reverse order on purpose (another batch composition)."""
    ps, sig, _ = bank
    swapped = run_experts(qwen, [p.swapped() for p in reversed(ps)], experts=ALL_GEN, generation=GEN)
    for s, t in zip(sig, reversed(swapped)):
        mirror = s.swapped()
        for name in ALL_GEN:
            assert mirror.experts[name] == t.experts[name], (s.id, name)     # exact (bank/canonical.py)
        assert t.meta["generation"] == s.meta["generation"]


def test_swapped_pairs_mirror_with_the_single_pass_bank_too(qwen):
    """The single-pass prompts read in the decoder's prompt tree and the rubric and PRePair
    verdicts started from the decoder's [system][question][A][B] KV still mirror under a swap,
    in another batch composition."""
    names = protocols.prompt_experts_for(protocols.SINGLE_PASS) + ALL_GEN
    ps = make_pairs(3, seed=4)
    sig = run_experts(qwen, ps, experts=names, generation=GEN)
    swapped = run_experts(qwen, [p.swapped() for p in reversed(ps)], experts=names, generation=GEN)
    for s, t in zip(sig, reversed(swapped)):
        mirror = s.swapped()
        for name in names:
            assert mirror.experts[name] == t.experts[name], (s.id, name)     # exact (bank/canonical.py)


def test_runs_layout(bank):
    _, sig, _ = bank
    for s in sig:
        assert len(s.experts["cot"]) == len(s.experts["deliberate"]) == 2
        assert len(s.experts["rubric"]) == len(s.experts["prepair"]) == 2
        assert len(s.experts["self_consistency"]) == 10          # [s0 ab, s0 ba, s1 ab, s1 ba, ...]
        assert len(s.experts["reference"]) == 1
        assert all(0.0 < u < 1.0 for n, runs in s.experts.items() if n not in protocols.NATIVE for u in runs)
        # native experts: the verdicts written in the same texts, 2 runs, None where none was written
        assert {n for n in s.experts if n in protocols.NATIVE} == set(protocols.NATIVE)
        assert all(len(s.experts[n]) == 2 and set(s.experts[n]) <= {None, 0.0, 0.5, 1.0} for n in protocols.NATIVE)
        assert len(set(s.experts["self_consistency"][0::2])) > 1      # samples differ


def test_generations_are_counted_once_per_pair(bank):
    """PRePair: one analysis per candidate (2), not per order (4); the rubric and the reference
    solution: one per pair, shared by both orders / both checks."""
    ps, sig, report = bank
    want_calls = {"cot": 2, "self_consistency": 2, "rubric": 1, "prepair": 2, "deliberate": 2, "reference": 1}
    for s in sig:
        assert {n: s.meta["generation"][n]["calls"] for n in ALL_GEN} == want_calls
        for n in ALL_GEN:
            assert s.meta["generation"][n]["tokens_decoded"] <= BUDGET * want_calls[n] * (5 if n == "self_consistency" else 1)
    cost = report.generative.cost
    assert {n: cost[n].calls for n in ALL_GEN} == {n: c * len(ps) for n, c in want_calls.items()}
    assert cost["self_consistency"].rows == 10 * len(ps)


class CountingDecoder:
    """Wraps the real decoder and records every prompt it is asked to decode."""
    reads_prompts = exports_prefixes = False      # interfaces.Decoder: a plain decoder
    stats = None

    def __init__(self, loaded):
        from baer_fast.runtime.decode import Decoder
        self.inner, self.prompts = Decoder(loaded), []
        self.eos = self.inner.eos

    def generate(self, requests):
        self.prompts += [r.prompt for r in requests]
        return self.inner.generate(requests)


def test_shared_generations_are_decoded_once_and_reused(qwen):
    """The decoder sees each PRePair analysis / reference solution prompt exactly once, and the
    verdicts of both orders embed the same analyses."""
    ps = make_pairs(2, seed=3)
    dec = CountingDecoder(qwen)
    out = run_generative(open_engine(qwen), ps, ["prepair", "reference", "rubric"], config=GEN, decoder=dec)
    assert len(dec.prompts) == len(set(dec.prompts)) == len(ps) * (2 + 1 + 1)
    for row in out:
        assert set(row["texts"]["prepair"]) == {"a", "b"} and set(row["texts"]["reference"]) == {"solution"}


def test_pairs_that_share_a_question_share_its_candidate_blind_generations(qwen):
    """A reward loop's round robin: 4 completions of one question make 6 pairs. The reference solution
    and the rubric see the question only, so each is decoded once for all 6 pairs (not 6 times), and
    each PRePair analysis once per completion (4, not 12). Every pair gets the shared texts, its meta
    counts its own calls, and a shared decode's tokens are split among its pairs (integer split,
    remainder to the first) so they sum to what the decoder decoded; the run's totals count each
    decode once. (Texts are not compared with each pair run alone: another batch composition may
    round a near-tie of the greedy argmax the other way.)"""
    from itertools import combinations
    from baer_fast.io.records import Pair
    q, comps = "Which number is prime, and why?", ["7 is prime", "8 is prime", "9 is prime", "prime: 11"]
    idx = list(combinations(range(4), 2))
    ps = [Pair(f"g{i}{j}", q, comps[i], comps[j]) for i, j in idx]
    names = ["reference", "rubric", "prepair"]
    dec, report = CountingDecoder(qwen), GenerativeReport()
    out = run_generative(open_engine(qwen), ps, names, config=GEN, decoder=dec, report=report)
    assert len(dec.prompts) == len(set(dec.prompts)) == 1 + 1 + 4
    for n, key in (("reference", "solution"), ("rubric", "rubric")):
        assert len({tuple(row["texts"][n][key]) for row in out}) == 1
    analysis = {}
    for (i, j), row in zip(idx, out):
        assert {n: row["meta"][n]["calls"] for n in names} == {"reference": 1, "rubric": 1, "prepair": 2}
        for c, key in ((i, "a"), (j, "b")):
            assert analysis.setdefault(c, row["texts"]["prepair"][key]) == row["texts"]["prepair"][key]
    assert len(analysis) == 4
    for n in names:
        decoded = sum(row["meta"][n]["tokens_decoded"] for row in out)
        assert decoded == report.cost[n].tokens_decoded > 0
        assert report.cost[n].calls == {"reference": 1, "rubric": 1, "prepair": 4}[n]
    t = report.cost["reference"].tokens_decoded
    assert [row["meta"]["reference"]["tokens_decoded"] for row in out] == [t // 6 + t % 6] + [t // 6] * 5


def test_the_shared_generations_benchmark_runs_both_arms_on_the_same_pairs(capsys):
    import json
    from tests.fixtures.checks import import_bench
    bench = import_bench("bench_shared_generations")
    assert bench.main(["--questions", "1", "--completions", "3", "--budget", "4", "--rounds", "1"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["pairs"] == 3
    assert out["per_pair"]["requests_decoded"] == 3 * (1 + 1 + 2) and out["shared"]["requests_decoded"] == 1 + 1 + 3
    assert 0 < out["shared"]["tokens_decoded"] < out["per_pair"]["tokens_decoded"]


def test_reference_is_eq9_and_feeds_the_reference_head(qwen):
    """u = sigma(logit v(a) - logit v(b)), each v read alone by a plain forward over {Y, N};
    the reference head reads the expert named `reference` as z = logit(u)."""
    from baer_fast.heads.reference import ReferenceHead
    from baer_fast.protocols import reference
    from baer_fast.runtime.naive import NaiveEngine
    from baer_fast.bank.prompting import PromptEncoder
    from baer_fast.runtime.queries import Query
    ps = make_pairs(2, seed=4)
    out = run_generative(open_engine(qwen), ps, ["reference"], config=GEN)
    enc = PromptEncoder(qwen.tokenizer, model_name="tiny", context_len=qwen.context_len)
    for p, row in zip(ps, out):
        checks = reference.verdicts(p.question, p.response_a, p.response_b, row["texts"]["reference"])
        lp = NaiveEngine(qwen).run([[Query(enc.encode(c, pair_id=p.id, expert="reference"),
                                           enc.label_ids(reference.LABELS)) for c in checks]]).logprobs[0]
        va, vb = lp[0][0] - lp[0][1], lp[1][0] - lp[1][1]
        # |du| <= max |d log-prob| here (sigmoid' <= 1/4, four log-probs)
        tol = paths_tol(naive_logprob_error(qwen, [[Query(enc.encode(c, pair_id=p.id, expert="reference"),
                                                          enc.label_ids(reference.LABELS)) for c in checks]]))
        assert abs(row["runs"]["reference"][0] - 1.0 / (1.0 + math.exp(vb - va))) <= tol
    sig = run_experts(qwen, ps, experts=["reference"], generation=GEN)
    z = ReferenceHead("reference").score(sig)
    for s, zi in zip(sig, z):
        u = s.experts["reference"][0]
        assert abs(zi - math.log(u / (1 - u))) <= fp64_tol(HEAD_OPS, abs(zi))


def test_sampled_runs_reproducible_and_batch_independent(qwen, bank):
    """Batched, the same seeds draw under other rounding and can take other tokens (this pair did on
    an AVX2 CPU: 0.043 apart, alone vs in the bank's batch); in the batch-invariant mode the pair's
    samples and runs are the same bits alone and beside the others."""
    ps, _, _ = bank
    alone = run_experts(qwen, [ps[2]], experts=["self_consistency"], generation=GEN, batch_invariant=True)[0]
    beside = run_experts(qwen, ps, experts=["self_consistency"], generation=GEN, batch_invariant=True)[2]
    assert alone.experts["self_consistency"] == beside.experts["self_consistency"]          # exact
    other_seed = GenerationConfig(max_new_tokens=GEN.max_new_tokens, seed=8)
    moved = run_experts(qwen, [ps[2]], experts=["self_consistency"], generation=other_seed)[0]
    assert moved.experts["self_consistency"] != alone.experts["self_consistency"]


def test_budgets_and_settings_recorded(qwen):
    ps = make_pairs(2, seed=5)
    cfg = GenerationConfig(max_new_tokens={"cot": 3, "reference": 5})
    rep = GenerativeReport()
    out = run_generative(open_engine(qwen), ps, ["cot", "reference"], config=cfg, report=rep)
    for row in out:
        assert row["meta"]["cot"]["max_new_tokens"] == 3 and row["meta"]["reference"]["max_new_tokens"] == 5
        assert row["meta"]["cot"]["tokens_decoded"] <= 2 * 3 and row["meta"]["reference"]["tokens_decoded"] <= 5
        assert row["meta"]["cot"]["temperature"] == 0.0
    assert rep.cost["cot"].seconds > 0 and rep.lines()[0].split()[0] == "cot"
    assert GenerationConfig().budget("reference") == 4096


def test_unknown_expert_is_refused(qwen):
    with pytest.raises(ValueError, match="generative experts"):
        run_experts(qwen, make_pairs(1), experts=["chain_of_thought"])


class EngineReadDecoder(CountingDecoder):
    """The same generations with the decoder's own verdicts dropped: every verdict is then read
    by the prefix engine on prompt + kept generation + cue."""

    def generate(self, requests):
        out = super().generate(requests)
        for res in out:
            res.verdicts = None
        return out


def test_verdicts_read_by_the_decoder_equal_the_engine_readout(qwen):
    ps = make_pairs(3, seed=6)
    names = ["cot", "self_consistency", "deliberate"]
    engine = open_engine(qwen)
    fast = run_generative(engine, ps, names, config=GEN)
    slow_report = GenerativeReport()
    slow = run_generative(engine, ps, names, config=GEN, decoder=EngineReadDecoder(qwen), report=slow_report)
    assert slow_report.readout.tokens_prefilled > 0
    tol = readout_tol(qwen, ps)
    for f, s in zip(fast, slow):
        assert f["texts"] == s["texts"]
        for name in names:
            for u, v in zip(f["runs"][name], s["runs"][name], strict=True):
                assert abs(u - v) <= tol, name


def test_full_bank_reads_single_pass_prompts_in_the_generation_prompt_tree(qwen, monkeypatch):
    """With generative experts in the bank, the single-pass prompts enter the decoder as prompt
    reads beside the generation prompts: one prompt tree prefills their shared
    [system][question][A][B] once for both (the distinct-prefix count of the two sets together,
    fewer than the two apart), the engine reads only the generations' verdicts, taking that
    prefix's KV from the decoder for the rubric and PRePair verdicts, and the single-pass runs
    are what the single-pass bank alone gives."""
    from baer_fast.bank import generative
    from baer_fast.runtime.decode import Decoder
    from baer_fast.runtime.prefill import PrefixEngine
    from tests.runtime.test_counts import distinct_prefixes

    class Recording(PrefixEngine):
        def run(self, groups, given=None):
            self.calls.append((groups, given))
            return super().run(groups, given=given)

    class RecordingDecoder(Decoder):
        def generate(self, requests, **kw):
            seen.extend(requests)
            return super().generate(requests, **kw)

    seen = []
    monkeypatch.setattr(generative, "open_decoder", lambda engine, config: RecordingDecoder(engine.loaded))
    ps = make_pairs(3, seed=9)
    engine, report = Recording(qwen), RunReport()
    engine.calls = []
    names = list(protocols.SINGLE_PASS) + ALL_GEN
    sig = run_experts(engine, ps, experts=names, generation=GEN, report=report)
    single = protocols.prompt_experts_for(protocols.SINGLE_PASS)
    single_ids = {q.ids for p in ps for q in build_all_queries_for(qwen, p, single)}
    reads = [r.prompt for r in seen if r.reads_prompt]
    gens = [r.prompt for r in seen if not r.reads_prompt]
    assert set(reads) == single_ids and gens        # calibraeval reads direct's two prompts too: same ids, no extra prefill
    gen = report.generative
    assert gen.decode_prefilled == distinct_prefixes(reads + gens) < distinct_prefixes(reads) + distinct_prefixes(gens)
    assert len(engine.calls) == 1                       # the verdicts only
    groups, given = engine.calls[0]
    assert not {q.ids for g in groups for q in g} & single_ids
    # rubric and PRePair verdicts: each order's [system][question][A][B] comes from the decoder
    assert all(len(h) == 2 for h in given)
    assert report.stats.tokens_prefilled == sum(distinct_prefixes([q.ids for q in g]) - distinct_prefixes([p for p, _, _ in h])
                                                for g, h in zip(groups, given))
    alone = run_experts(qwen, ps, derived_params=report.derived_params)
    tol = paths_tol(naive_run_error(qwen, ps, protocols.SINGLE_PASS, derived_params=report.derived_params))
    for s, a in zip(sig, alone):
        for name in protocols.SINGLE_PASS:
            for u, v in zip(s.experts[name], a.experts[name], strict=True):
                assert abs(u - v) <= tol, name
        assert s.meta["tokens_prefilled"] == a.meta["tokens_prefilled"]
    shared, naive = report.prefill_totals()
    assert shared == report.stats.tokens_prefilled + gen.decode_prefilled
    assert naive == report.tokens_naive + gen.readout_naive + gen.decode_naive
    assert len(reads) == len(set(reads))                # calibraeval's copies of direct's prompts: read once
    assert report.tokens_naive == sum(len(q.ids) for p in ps for q in build_all_queries_for(qwen, p, single))
    assert gen.decode_naive == sum(len(i) for i in gens)
    assert gen.readout_naive == sum(len(q.ids) for g in groups for q in g)


def build_all_queries_for(loaded, pair, names):
    from baer_fast.bank.prompting import PromptEncoder
    from baer_fast.bank.queries import build_queries
    enc = PromptEncoder.of(loaded)
    return build_queries(enc, pair, names)[0]
