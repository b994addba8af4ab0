"""The shared-prefix batched decoder against HF `generate`, one prompt at a time (fp32)."""
import pytest

from baer_fast.runtime.decode import Decoder, GenRequest
from tests.fixtures.checks import hf_greedy
from tests.fixtures.prompts import bank_tree_prompts, random_prompts
from tests.runtime.test_counts import distinct_prefixes

# every torch.empty float starts as NaN: an unwritten column read anywhere shows up (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("poisoned_empty")


@pytest.mark.parametrize("arch", ["qwen3", "llama"])
@pytest.mark.parametrize("max_rows", [3, 64])
def test_greedy_equals_hf_generate(gen_models, arch, max_rows):
    """Prompts of different lengths in one batch; per-row budgets finish rows early, and with
    max_rows=3 waiting prompts enter as rows leave (continuous batching)."""
    loaded = gen_models(arch)[1]
    prompts = random_prompts(loaded, 8, seed=1)
    budgets = [16, 3, 16, 1, 12, 16, 7, 10]
    dec = Decoder(loaded, max_rows=max_rows)
    got = dec.generate([GenRequest(p, b) for p, b in zip(prompts, budgets)])
    for p, b, res in zip(prompts, budgets, got):
        want = hf_greedy(loaded, p, b)
        assert list(res.tokens[0]) == want
        assert res.finish[0] == ("eos" if want[-1] in dec.eos else "length")
    assert dec.stats.tokens_prefilled <= sum(len(p) for p in prompts)
    assert dec.stats.tokens_decoded == sum(len(r.tokens[0]) for r in got)


@pytest.mark.parametrize("max_rows", [2, 64])
def test_shared_prefixes_prefilled_once(qwen, max_rows):
    """Prompts sharing a stem (like one order's [system][question][A][B] under several
    instructions): the stem is prefilled once, each suffix over its KV; tokens equal generate."""
    stem = random_prompts(qwen, 1, seed=7, lo=30, hi=30)[0]
    tails = random_prompts(qwen, 5, seed=8, lo=1, hi=12)
    prompts = [stem + t for t in tails] + [stem[:10] + tails[0], random_prompts(qwen, 1, seed=9)[0]]
    budgets = [9, 2, 12, 5, 12, 7, 10]
    dec = Decoder(qwen, max_rows=max_rows)
    got = dec.generate([GenRequest(p, b, samples=1) for p, b in zip(prompts, budgets)])
    for p, b, res in zip(prompts, budgets, got):
        assert list(res.tokens[0]) == hf_greedy(qwen, p, b)
    if max_rows == 64:     # all enter at once: stem[:10] once, the rest of the stem once, every suffix once
        assert dec.stats.tokens_prefilled == sum(len(p) for p in prompts) - 5 * 30 - 10 + 30
        assert dec.stats.tokens_prefilled == distinct_prefixes(prompts)


@pytest.mark.parametrize("max_rows,prefill_tokens", [(5, 8192), (64, 8192), (64, 24)])
def test_prompt_tree_prefilled_once_per_node(qwen, max_rows, prefill_tokens):
    """The shape of a generative bank: a shared template, per pair a question, per order an
    [A][B], per order several instructions, one identical prompt twice and sampled rows. Every
    node is prefilled once when all enter together (the distinct-prefix count), and every row's
    tokens equal `generate` on its prompt alone; also with a tiny prefill budget that splits
    every level into many forwards."""
    prompts = bank_tree_prompts(qwen)
    budgets = [3 + (i * 5) % 9 for i in range(len(prompts))]
    reqs = [GenRequest(p, b) for p, b in zip(prompts, budgets)]
    reqs[1] = _sampled(prompts[1], [5, 6, 7], n=6)
    dec = Decoder(qwen, max_rows=max_rows, prefill_tokens=prefill_tokens)
    got = dec.generate(reqs)
    for k, (p, b, res) in enumerate(zip(prompts, budgets, got)):
        if k != 1:
            assert list(res.tokens[0]) == hf_greedy(qwen, p, b), k
    assert got[1].tokens == Decoder(qwen).generate([reqs[1]])[0].tokens
    if max_rows == 64:
        assert dec.stats.tokens_prefilled == distinct_prefixes(prompts)
    else:
        assert distinct_prefixes(prompts) < dec.stats.tokens_prefilled < sum(len(p) for p in prompts)


@pytest.mark.parametrize("max_rows", [3, 64])
def test_prompt_reads_share_the_tree_and_read_what_the_engine_reads(qwen, max_rows):
    """Prompt reads (no tokens to generate) enter the prompt tree with the generations: every node
    is prefilled once when all enter together, each read's verdict equals a plain forward of its
    prompt, and the generations' tokens are those of a decoder that never saw the reads. With 3
    rows, reads free their slots between generations (kept rows move down) as requests stream in."""
    from baer_fast.runtime.naive import NaiveEngine
    from baer_fast.runtime.queries import Query
    prompts = bank_tree_prompts(qwen)
    choices = [(5, 6), (7, 8, 9)]
    reads = {k for k in range(len(prompts)) if k % 3 != 1}
    reqs = [GenRequest(p, 0, choices=choices[k % 2]) if k in reads else GenRequest(p, 2 + k % 5)
            for k, p in enumerate(prompts)]
    reqs[1] = _sampled(prompts[1], [5, 6, 7], n=6)
    dec = Decoder(qwen, max_rows=max_rows)
    got = dec.generate(reqs)
    gens = [k for k in range(len(reqs)) if k not in reads]
    without = Decoder(qwen, max_rows=max_rows)
    alone = without.generate([reqs[k] for k in gens])
    for k, want in zip(gens, alone):
        assert got[k].tokens == want.tokens and got[k].finish == want.finish
    assert dec.stats.steps == without.stats.steps       # the slots reads free are refilled before a step
    plain = NaiveEngine(qwen).run([[Query(prompts[k], reqs[k].choices) for k in sorted(reads)]]).logprobs[0]
    from tests.fixtures.tolerances import naive_logprob_error, paths_tol
    tol = paths_tol(naive_logprob_error(qwen, [[Query(prompts[k], reqs[k].choices) for k in sorted(reads)]]))
    for k, lp in zip(sorted(reads), plain):
        assert got[k].finish == ["read"] and got[k].tokens == [()]
        assert got[k].verdicts[0] == pytest.approx(lp, abs=tol)
    assert dec.stats.tokens_decoded == sum(len(t) for k in gens for t in got[k].tokens)
    if max_rows == 64:
        assert dec.stats.tokens_prefilled == distinct_prefixes(prompts)
    only_reads = Decoder(qwen).generate([reqs[k] for k in sorted(reads)])
    for r, k in zip(only_reads, sorted(reads)):
        assert r.verdicts[0] == pytest.approx(got[k].verdicts[0], abs=tol)


def test_exported_prefix_kv_is_the_prompts_own(qwen):
    """A prefix exported from a request's slot right after its prefill holds that prefix's KV (as
    one plain forward computes it), whatever else shares the tree or reads; past the byte budget,
    nothing more is exported; a prefix that is not the request's is refused."""
    import torch

    from tests.fixtures.checks import prefix_kv
    prompts = bank_tree_prompts(qwen)
    stem, other = prompts[0][:30], prompts[3][:25]
    reqs = [GenRequest(p, 0, choices=(5, 6)) if k % 2 else GenRequest(p, 3) for k, p in enumerate(prompts)]
    dec = Decoder(qwen, max_rows=4)
    per_token = qwen.kv_bytes_per_token
    dec.generate(reqs, export={0: [stem], 3: [other]}, export_bytes=30 * per_token)
    assert list(dec.exported) == [stem]                # the second did not fit the budget
    from tests.fixtures.tolerances import kv_tol
    for got, want in zip(dec.exported[stem], prefix_kv(qwen, stem)):
        assert torch.allclose(got, want, atol=kv_tol(qwen, stem), rtol=0)
    dec.generate(reqs, export={0: [stem], 3: [other]}, export_bytes=55 * per_token)
    assert set(dec.exported) == {stem, other}
    with pytest.raises(ValueError, match="prefix of its prompt"):
        dec.generate(reqs, export={1: [other]}, export_bytes=1 << 30)


def test_stop_string_ends_a_row_early(qwen):
    """A stop string taken from the row's own greedy text: the row stops at the token that
    completes it (that token kept, as `generate` does), the other rows run on unchanged."""
    tok = qwen.tokenizer
    prompts = random_prompts(qwen, 4, seed=2)
    full = [hf_greedy(qwen, p, 14) for p in prompts]
    piece = next(s for s in (tok.decode(full[0][k:k + 1]) for k in range(3, 10)) if s.strip() and "\ufffd" not in s)
    stop = (piece.strip(),)
    k = next(k for k in range(1, 15) if stop[0] in tok.decode(full[0][:k]))
    got = Decoder(qwen).generate([GenRequest(prompts[0], 14, stop=stop)] + [GenRequest(p, 14) for p in prompts[1:]])
    assert list(got[0].tokens[0]) == full[0][:k] and got[0].finish[0] == "stop"
    for res, want in zip(got[1:], full[1:]):
        assert list(res.tokens[0]) == want


def _sampled(prompt, seeds, n=12, temperature=0.9, top_p=0.9):
    return GenRequest(prompt, n, samples=len(seeds), temperature=temperature, top_p=top_p, seeds=tuple(seeds))


def test_samples_are_reproducible_and_independent_of_the_batch(qwen):
    prompts = random_prompts(qwen, 5, seed=3)
    target = _sampled(prompts[0], [11, 12, 13])
    alone = Decoder(qwen).generate([target])[0]
    again = Decoder(qwen).generate([target])[0]
    assert alone.tokens == again.tokens
    # another batch: other sampled and greedy rows around it, few slots (rows enter and leave)
    crowd = [GenRequest(prompts[1], 5), _sampled(prompts[2], [1, 2]), target, _sampled(prompts[3], [7], n=3),
             GenRequest(prompts[4], 9)]
    mixed = Decoder(qwen, max_rows=4).generate(crowd)[2]
    assert mixed.tokens == alone.tokens
    # the same seed in a one-sample request gives that sample; other seeds give other samples
    single = Decoder(qwen).generate([_sampled(prompts[0], [12])])[0]
    assert single.tokens[0] == alone.tokens[1]
    assert len(set(alone.tokens)) > 1


def test_samples_share_one_prefill(qwen):
    prompt = random_prompts(qwen, 1, seed=4)[0]
    dec = Decoder(qwen)
    dec.generate([_sampled(prompt, range(5), n=4)])
    assert dec.stats.tokens_prefilled == len(prompt)
    assert dec.stats.tokens_decoded == 5 * 4
    # one slot per sample, each as wide as the prompt, the budget and the next token's column
    assert dec.stats.kv_bytes_peak == 5 * (len(prompt) + 4 + 1) * qwen.kv_bytes_per_token


def test_greedy_and_top_p_limits(qwen):
    """top_p -> 0 keeps only the most likely token: sampling then equals greedy decoding."""
    prompt = random_prompts(qwen, 1, seed=5)[0]
    greedy = Decoder(qwen).generate([GenRequest(prompt, 10)])[0].tokens[0]
    tiny_p = Decoder(qwen).generate([_sampled(prompt, [3, 4], n=10, temperature=1.0, top_p=1e-9)])[0]
    assert tiny_p.tokens == [greedy, greedy]


def test_bad_requests_are_refused():
    with pytest.raises(ValueError):
        GenRequest((1, 2), 0)                                   # nothing to generate and nothing to read
    with pytest.raises(ValueError):
        GenRequest((1, 2), 0, choices=(3, 4), cue=(5,))          # a prompt read has no generation to cue
    with pytest.raises(ValueError):
        GenRequest((1, 2), -1, choices=(3, 4))
    with pytest.raises(ValueError):
        GenRequest((1, 2), 4, samples=2, temperature=0.7, seeds=(1,))


def _full_sort_reference(logits, temps, top_ps, us):
    """Plain loops: the nucleus by a full sort, then the inverse CDF over it in token-id order."""
    import torch
    out = []
    for lg, t, p, u in zip(logits, temps, top_ps, us):
        probs = torch.softmax(lg / t, -1)
        ps, order = probs.sort(descending=True)
        mass, nucleus = 0.0, {}
        for q, tok in zip(ps.tolist(), order.tolist()):
            if nucleus and mass >= p:
                break
            nucleus[tok], mass = q, mass + q
        target, acc = u * sum(nucleus[k] for k in sorted(nucleus)), 0.0
        pick = max(nucleus)
        for tok in sorted(nucleus):
            acc += nucleus[tok]
            if acc > target:
                pick = tok
                break
        out.append(pick)
    return out


@pytest.mark.parametrize("vocab", [50, 1200, 32001])
def test_nucleus_equals_plain_loops(vocab):
    """Peaked rows and flat rows pick what plain Python loops over a full sort pick."""
    import torch

    from baer_fast.runtime.sampling import pick_tokens
    g = torch.Generator().manual_seed(vocab)
    scale = torch.tensor([12.0, 0.1, 6.0, 1.0, 30.0, 0.5])[:, None]
    logits = torch.randn(6, vocab, generator=g) * scale
    temps, top_ps = [0.7, 1.0, 0.5, 1.3, 0.9, 0.7], [0.95, 0.9, 1.0, 0.5, 0.99, 0.3]
    us = torch.rand(6, generator=g, dtype=torch.float64).tolist()
    want = _full_sort_reference(logits, temps, top_ps, us)
    got = pick_tokens(logits, torch.tensor(temps), torch.tensor(top_ps), torch.tensor(us, dtype=torch.float64))
    assert got.tolist() == want


def test_real_length_prompts_are_not_padded_to_each_others_pasts(qwen):
    """Every prompt of the single-pass bank on 12 LLMBar pairs (the demo's sample), entering
    together: one level's nodes sit over very different pasts. Chunked by token budgets alone,
    short-past nodes were padded to the longest past (3.87x the least attention scores here);
    bounded by FLOPs (engine.flop_chunks), 1.36x; with each query slice in width groups, 1.21x,
    same tokens."""
    from baer_fast.runtime.plan.prefix_tree import build_tree, tree_scores
    from tests.fixtures.checks import sample_bank_groups
    prompts = [q.ids for g in sample_bank_groups(qwen, 12) for q in g]
    least, got = tree_scores(build_tree(prompts)), {}
    for split in (False, True):
        dec = Decoder(qwen, max_rows=len(prompts), split_attention=split)
        got[split] = [r.tokens for r in dec.generate([GenRequest(p, 1) for p in prompts])]
        assert dec.stats.tokens_prefilled == distinct_prefixes(prompts)
        assert dec.stats.scores_prefilled <= (1.25 if split else 1.5) * least
    assert got[True] == got[False]


def test_decode_steps_count_their_masked_padding(qwen):
    """A decode step in one width runs every row over the widest row's columns: alone a row
    computes only its own context; beside a longer one, the shorter row's extra columns are
    counted as padding (width groups: test_width_groups.py)."""
    short, long = (random_prompts(qwen, 1, seed=s, lo=n, hi=n)[0] for s, n in ((3, 10), (4, 50)))
    alone = Decoder(qwen)
    alone.generate([GenRequest(long, 5)])
    assert alone.stats.scores_decoded == alone.stats.scores_decoded_own > 0
    both = Decoder(qwen, split_attention=False)
    outs = [len(r.tokens[0]) for r in both.generate([GenRequest(short, 5), GenRequest(long, 5)])]
    want = own = 0
    for step in range(1, max(outs)):               # the first token comes from the prefill's logits
        lens = [len(p) + step - 1 for p, k in zip((short, long), outs) if k > step]
        want, own = want + len(lens) * (max(lens) + 1), own + sum(lens) + len(lens)
    assert (both.stats.scores_decoded, both.stats.scores_decoded_own) == (want, own)
    assert want > own


def test_memory_budget_forces_waves_and_bounds_the_slots(qwen):
    """A budget that holds three slots after the forwards' activations: rows go through in waves
    of at most three, the slot buffers plus the reserve stay within it, and every row's tokens are
    those of a decoder with room for all of them."""
    from baer_fast.runtime.slots import activation_bytes
    prompts = random_prompts(qwen, 7, seed=11)
    reqs = [GenRequest(p, 4 + k % 3) for k, p in enumerate(prompts)] + [_sampled(prompts[0], [1, 2, 3], n=5)]
    want = Decoder(qwen).generate(reqs)
    need = max(len(r.prompt) + r.max_new_tokens + 1 for r in reqs)
    reserve = activation_bytes(qwen, tokens=64, rows=10, columns=min(need, 4 * 64))
    budget = reserve + 3 * need * qwen.kv_bytes_per_token
    dec = Decoder(qwen, memory_budget_bytes=budget, prefill_tokens=64)
    got = dec.generate(reqs)
    assert [r.tokens for r in got] == [r.tokens for r in want]
    assert dec.stats.rows_peak == 3
    assert dec.stats.kv_bytes_peak + dec.stats.reserve_bytes <= budget
    assert dec.stats.kv_bytes_peak == 3 * need * qwen.kv_bytes_per_token


def test_verdict_reads_pad_short_cues_past_the_widest_slot(qwen):
    """Two rows finish together and read verdicts in one forward: the widest row has the shortest
    cue, so its padding runs past the slots' last column. Each verdict equals a plain forward of
    prompt + generation + cue."""
    from baer_fast.runtime.naive import NaiveEngine
    from baer_fast.runtime.queries import Query
    long, short = random_prompts(qwen, 1, seed=21, lo=40, hi=40)[0], random_prompts(qwen, 1, seed=22, lo=5, hi=5)[0]
    reqs = [GenRequest(long, 4, cue=(11,), choices=(5, 6)), GenRequest(short, 4, cue=tuple(range(12, 20)), choices=(7, 8))]
    got = Decoder(qwen, eos_ids=()).generate(reqs)
    queries = [Query(r.prompt + g.tokens[0] + r.cue, r.choices) for r, g in zip(reqs, got)]
    plain = NaiveEngine(qwen).run([queries]).logprobs[0]
    from tests.fixtures.tolerances import naive_logprob_error, paths_tol
    tol = paths_tol(naive_logprob_error(qwen, [queries]))
    for g, lp in zip(got, plain):
        assert g.verdicts[0] == pytest.approx(lp, abs=tol)
