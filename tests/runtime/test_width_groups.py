"""Decode steps in width groups: the plan is optimal, split steps give every row the tokens
`generate` gives it alone, sorted slots keep them, and real lengths lose most of their padding."""
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from baer_fast.runtime.plan import width_groups
from baer_fast.runtime.decode import Decoder, GenRequest
from tests.fixtures.checks import hf_greedy
from tests.fixtures.prompts import random_prompts

pytestmark = pytest.mark.usefixtures("poisoned_empty")


def _brute(widths, penalty, max_groups):
    n, best = len(widths), None
    for k in range(min(max_groups, n)):
        for cuts in itertools.combinations(range(1, n), k):
            b = [0, *cuts, n]
            c = sum((hi - lo) * max(widths[lo:hi]) for lo, hi in zip(b, b[1:])) + penalty * k
            best = c if best is None else min(best, c)
    return best


def _check_cover(groups, widths, max_groups):
    assert groups[0][0] == 0 and groups[-1][1] == len(widths) and len(groups) <= max_groups
    for (lo, hi, w), nxt in zip(groups, groups[1:] + [None]):
        assert hi > lo and w == max(widths[lo:hi])
        assert nxt is None or nxt[0] == hi


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(1, 60), min_size=1, max_size=9), st.sampled_from([0, 3, 25, 200]),
       st.sampled_from([1, 2, 3, 5, width_groups.MAX_GROUPS]))
def test_plan_is_the_cheapest_cut(widths, penalty, max_groups):
    groups = width_groups.plan(widths, penalty, max_groups)
    _check_cover(groups, widths, max_groups)
    assert width_groups.cost(groups) + penalty * (len(groups) - 1) == _brute(widths, penalty, max_groups)
    if max_groups == width_groups.MAX_GROUPS:
        assert width_groups.best_cost(widths, penalty) == _brute(widths, penalty, max_groups)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(1, 3000), min_size=65, max_size=400), st.sampled_from([0, 1024, 8192]))
def test_plan_of_many_rows_cuts_in_blocks(widths, penalty):
    """Beyond MAX_CUTS rows the cuts fall on block edges; the plan still covers every row at its
    range's widest and never costs more than one range."""
    groups = width_groups.plan(widths, penalty)
    _check_cover(groups, widths, width_groups.MAX_GROUPS)
    step = -(-len(widths) // width_groups.MAX_CUTS)
    assert all(lo % step == 0 for lo, _, _ in groups)
    assert width_groups.cost(groups) + penalty * (len(groups) - 1) <= len(widths) * max(widths)


@pytest.fixture
def sdpa_widths(monkeypatch):
    """(rows, key width, queries) of every SDPA call the width-group attention makes."""
    from transformers.integrations import sdpa_attention
    real, seen = sdpa_attention.sdpa_attention_forward, []

    def spy(module, query, key, *args, **kwargs):
        seen.append((query.shape[0], key.shape[2], query.shape[2]))
        return real(module, query, key, *args, **kwargs)
    monkeypatch.setattr(sdpa_attention, "sdpa_attention_forward", spy)
    return seen


@pytest.mark.parametrize("arch", ["qwen3", "llama"])
def test_split_attention_give_the_tokens_of_generate(gen_models, arch, sdpa_widths):
    """Six prompts of 5 to 60 tokens, split wherever a column is saved: each range's attention
    runs over its own width only, no step scores a masked column, and every row's greedy tokens
    equal `generate` on its prompt alone."""
    loaded = gen_models(arch)[1]
    prompts = [random_prompts(loaded, 1, seed=s, lo=n, hi=n)[0] for s, n in enumerate((5, 60, 12, 40, 25, 8))]
    dec = Decoder(loaded, group_columns=0)
    got = dec.generate([GenRequest(p, 10) for p in prompts])
    for p, res in zip(prompts, got):
        assert list(res.tokens[0]) == hf_greedy(loaded, p, 10)
    assert dec.stats.scores_decoded == dec.stats.scores_decoded_own
    widest = max(len(p) for p in prompts) + 10
    assert any(w < widest - 20 for _, w, _ in sdpa_widths)         # short ranges attended narrowly


def test_sorted_slots_keep_every_rows_tokens(qwen):
    """Short and long prompts alternating in slot order, more rows than groups: the decoder sorts
    its slots by length (a KV copy per row), after which two ranges hold every row at its own
    width, and the tokens stay those of `generate`."""
    prompts = [random_prompts(qwen, 1, seed=40 + k, lo=n, hi=n)[0] for k, n in enumerate([6, 70] * 10)]
    dec = Decoder(qwen, group_columns=0)
    got = dec.generate([GenRequest(p, 24) for p in prompts])
    assert dec.stats.sorts >= 1
    for p, res in zip(prompts, got):
        assert list(res.tokens[0]) == hf_greedy(qwen, p, 24)
    unsplit = Decoder(qwen, split_attention=False)
    unsplit.generate([GenRequest(p, 24) for p in prompts])
    assert dec.stats.scores_decoded == dec.stats.scores_decoded_own < 0.7 * unsplit.stats.scores_decoded


def test_real_lengths_lose_their_decode_padding(qwen):
    """cot, deliberate and self-consistency on the demo's LLMBar sample (real lengths), 32-token
    budgets: with one width per step the rows compute about 1.9x their own attention scores; in
    width groups at the CPU's group cost most of that padding goes (1.07x with id-keyed seeds and
    one sort; 1.21x with content-keyed seeds, whose samples stop at other steps so the sort does
    not pay). Same runs both ways."""
    from baer_fast.commands.demo import sample_pairs
    from baer_fast.runtime.prefill import PrefixEngine
    from baer_fast.bank.generative import GenerationConfig, run_generative
    names = ["cot", "deliberate", "self_consistency"]
    cfg = GenerationConfig(max_new_tokens={n: 32 for n in names})
    pairs, out = sample_pairs(8), {}
    for split in (True, False):
        dec = Decoder(qwen, split_attention=split)
        rows = run_generative(PrefixEngine(qwen), pairs, names, config=cfg, decoder=dec)
        out[split] = (dec.stats, [r["runs"] for r in rows])
    (s, runs_s), (u, runs_u) = out[True], out[False]
    assert s.scores_decoded_own == u.scores_decoded_own
    assert u.scores_decoded > 1.5 * u.scores_decoded_own
    # width groups take at least two thirds of the one-width padding away
    assert s.scores_decoded - s.scores_decoded_own <= (u.scores_decoded - u.scores_decoded_own) / 3
    from tests.fixtures.tolerances import readout_tol
    tol = readout_tol(qwen, pairs)       # same tokens, so the verdicts differ by the readout's rounding
    for a, b in zip(runs_s, runs_u):
        for name in names:
            assert a[name] == pytest.approx(b[name], abs=tol)


def test_verdicts_read_after_the_cue_in_width_groups(qwen, sdpa_widths):
    """cot and deliberate declare their cue: the decoder reads their verdicts as rows finish,
    one forward over the finished rows' missing tokens and cues, also split into width groups.
    Same runs as a decoder in one width."""
    from baer_fast.commands.demo import sample_pairs
    from baer_fast.runtime.prefill import PrefixEngine
    from baer_fast.bank.generative import GenerationConfig, run_generative
    names = ["cot", "deliberate"]
    cfg = GenerationConfig(max_new_tokens={n: 6 for n in names})
    runs = {}
    for split in (True, False):
        sdpa_widths.clear()
        dec = Decoder(qwen, group_columns=0, split_attention=split)
        runs[split] = [r["runs"] for r in run_generative(PrefixEngine(qwen), sample_pairs(4), names, config=cfg,
                                                         decoder=dec)]
        assert dec.stats.tokens_cue > 0
        read = [(b, w) for b, w, q in sdpa_widths if q > 1]
        assert bool(read) == split                      # split verdict reads went through the groups
    from tests.fixtures.tolerances import readout_tol
    tol = readout_tol(qwen, sample_pairs(4))       # same tokens: the verdicts differ by rounding only
    for a, b in zip(runs[True], runs[False]):
        for name in names:
            assert a[name] == pytest.approx(b[name], abs=tol)


def test_a_model_whose_masked_calls_run_eager_is_not_split(gen_models, monkeypatch):
    """Where masked calls cannot run on SDPA (soft-capped scores: eager), steps stay whole."""
    loaded = gen_models("llama")[1]
    monkeypatch.setattr(type(loaded), "masked_attention", lambda self: "eager")
    prompts = [random_prompts(loaded, 1, seed=s, lo=n, hi=n)[0] for s, n in enumerate((5, 60))]
    dec = Decoder(loaded, group_columns=0)
    dec.generate([GenRequest(p, 4) for p in prompts])
    assert dec.stats.scores_decoded > dec.stats.scores_decoded_own


def test_a_forward_that_refuses_the_groups_decodes_in_one_width(qwen, refused_width_groups, caplog):
    """Remote code that picks its attention by name and knows none of ours: the failing step runs
    again in one width, so do the rest, with a warning; the tokens are still generate's."""
    prompts = [random_prompts(qwen, 1, seed=s, lo=n, hi=n)[0] for s, n in enumerate((5, 60, 12))]
    dec = Decoder(qwen, group_columns=0)
    got = dec.generate([GenRequest(p, 6) for p in prompts])
    for p, res in zip(prompts, got):
        assert list(res.tokens[0]) == hf_greedy(qwen, p, 6)
    assert dec.stats.scores_decoded > dec.stats.scores_decoded_own
    assert "decode steps in one width" in caplog.text and "KeyError" in caplog.text
