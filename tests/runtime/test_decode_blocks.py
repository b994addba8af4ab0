"""Decode steps in blocks with static shapes (runtime/decode_step.py, decode_graphs.py) against the
per-step loop they replaced, on CPU in fp32.

The reference is that loop, kept here verbatim as `_per_step`: one forward, then the host picks
each row's token, tests EOS, stops and budget, and retires finished rows at once. Blocks read the
tokens once per `check_every` steps and trim what a row computed after its finish. Rows stop at
different steps (EOS ids taken from their own greedy text, a stop string, budgets), some are
sampled, some ask for a verdict after a cue, and few slots make requests wait and stream in.
"""
import logging

import pytest

from baer_fast.runtime import decode_step
from baer_fast.runtime.decode import Decoder, GenRequest
from tests.fixtures.prompts import random_prompts
from tests.fixtures.tolerances import as_float64, paths_tol

# every torch.empty float starts as NaN: an unwritten column read anywhere shows up (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("poisoned_empty")


def _per_step(blocks):
    """The decode step before blocks (decode.Decoder._step until this change)."""
    import torch
    dec = blocks.dec
    groups = None if dec._kernel else dec._groups()
    lens = dec._lens()
    pos = torch.tensor(lens, device=dec.loaded.device)[:, None]
    ids = torch.tensor([r.out[-1] for r in dec._rows], device=dec.loaded.device)[:, None]
    if dec._kernel:
        hidden = dec._forward(0, ids, pos, kernel=True)
    else:
        hidden, groups = dec._forward_in_groups(0, ids, pos, groups)
    dec.stats.steps += 1
    dec._advance(list(dec._rows), dec._logits(hidden[:, -1]), first=0)


def _generate(loaded, reqs, monkeypatch=None, **kw):
    """-> (results, stats); with monkeypatch: the per-step reference loop."""
    if monkeypatch is None:
        dec = Decoder(loaded, **kw)
        return dec.generate(reqs), dec.stats
    with monkeypatch.context() as m:
        m.setattr(decode_step.Blocks, "run", _per_step)
        dec = Decoder(loaded, **kw)
        return dec.generate(reqs), dec.stats


@pytest.fixture(scope="module")
def workload(gen_models):
    """Requests whose rows end at different steps, and the EOS ids that end them."""
    loaded = gen_models("qwen3")[1]
    tok = loaded.tokenizer
    prompts = random_prompts(loaded, 6, seed=21)
    free = Decoder(loaded, eos_ids=()).generate([GenRequest(p, 14) for p in prompts])
    outs = [r.tokens[0] for r in free]
    eos = {outs[0][4], outs[2][9]}                            # rows 0 and 2 end early (and any row emitting these)
    piece = next(s.strip() for s in (tok.decode(outs[5][k:k + 1]) for k in range(2, 9))
                 if s.strip() and "\ufffd" not in s)
    reqs = [GenRequest(prompts[0], 12), GenRequest(prompts[1], 5), GenRequest(prompts[2], 13),
            GenRequest(prompts[3], 9, cue=(5, 6), choices=(7, 8)),
            GenRequest(prompts[4], 11, samples=3, temperature=0.9, top_p=0.9, seeds=(3, 4, 5)),
            GenRequest(prompts[5], 12, stop=(piece,), cue=(9,), choices=(10, 11, 12)),
            GenRequest(prompts[0], 7, samples=2, temperature=1.1, top_p=0.8, seeds=(8, 9), cue=(13,), choices=(5, 6))]
    return loaded, reqs, frozenset(eos)


def _verdicts(results):
    return [v for r in results for v in (r.verdicts or []) if v is not None]


@pytest.mark.parametrize("max_rows", [4, 64])
@pytest.mark.parametrize("check_every", [1, 3, 8])
def test_blocks_decode_the_per_step_tokens(workload, monkeypatch, check_every, max_rows):
    loaded, reqs, eos = workload
    want, _ = _generate(loaded, reqs, monkeypatch, eos_ids=eos, max_rows=max_rows)
    got, stats = _generate(loaded, reqs, eos_ids=eos, max_rows=max_rows, check_every=check_every)
    assert [r.tokens for r in got] == [r.tokens for r in want]
    assert [r.finish for r in got] == [r.finish for r in want]
    finishes = {f for r in want for f in r.finish}
    assert {"eos", "stop", "length"} <= finishes               # the workload ends rows every way
    lengths = {len(t) for r in want for t in r.tokens}
    assert len(lengths) > 3                                      # ...and at many different steps
    assert stats.blocks <= stats.steps and stats.tokens_decoded == sum(len(t) for r in got for t in r.tokens)
    if check_every == 1:                                         # the same schedule: every number the same
        assert _verdicts(got) == _verdicts(want) and stats.tokens_overshoot == 0
    else:
        assert stats.tokens_overshoot > 0 and stats.blocks < stats.steps
        # verdicts read later, beside other rows: equal up to the rounding of two fp32 paths
        exact, _ = _generate(as_float64(loaded), reqs, monkeypatch, eos_ids=eos, max_rows=max_rows)
        assert [r.tokens for r in exact] == [r.tokens for r in want]
        err = max(abs(a - b) for x, y in zip(_verdicts(want), _verdicts(exact)) for a, b in zip(x, y))
        tol = paths_tol(err)
        assert all(abs(a - b) <= tol for x, y in zip(_verdicts(got), _verdicts(want)) for a, b in zip(x, y))


def test_block_length_never_passes_a_budget(workload):
    """A block is at most the least budget left: rows that end by length end on a block's last step."""
    loaded, reqs, _ = workload
    reqs = [r for r in reqs if not r.stop]
    got, stats = _generate(loaded, reqs, eos_ids=(), check_every=64)
    assert [len(t) for r in got for t in r.tokens] == [r.max_new_tokens for r in reqs for _ in range(r.samples)]
    assert stats.tokens_overshoot == 0


def test_buckets():
    assert decode_step.buckets(5) == [1, 2, 4, 5] and decode_step.buckets(1) == [1]
    assert [decode_step.bucket(n, 5, True) for n in range(1, 6)] == [1, 2, 4, 4, 5]
    assert [decode_step.bucket(n, 5, False) for n in range(1, 6)] == [1, 2, 3, 4, 5]


def _eager_capture(captured):
    """A stand-in for torch.cuda.CUDAGraph on CPU: runs the step's body at capture and at each replay."""
    def capture(body):
        body()
        captured.append(body)
        return lambda: body() and None
    return capture


def test_captured_steps_over_padded_buckets_give_the_per_step_tokens(workload, monkeypatch):
    """The captured path's plumbing on CPU: static buffers, buckets padded with pad rows at column 0
    of free slots, full-width masked steps, greedy ids from the step, sampled rows picked after it."""
    loaded, reqs, eos = workload
    want, _ = _generate(loaded, reqs, monkeypatch, eos_ids=eos, max_rows=6)
    captured, seen, real = [], [], decode_step.bucket
    dec = Decoder(loaded, eos_ids=eos, max_rows=6, check_every=4, graph_capture=_eager_capture(captured))
    assert dec.graphs                                    # its probe (through the same stand-in) passed
    captured.clear()
    monkeypatch.setattr(decode_step, "bucket", lambda n, slots, padded: seen.append((n, real(n, slots, padded)))
                        or seen[-1][1])
    got = dec.generate(reqs)
    assert [r.tokens for r in got] == [r.tokens for r in want]
    assert len(captured) == len({b for _, b in seen}) >= 2          # one capture per bucket met
    assert any(b > n for n, b in seen)                               # padded steps among them


def test_a_capture_that_does_not_replay_is_refused(workload, caplog):
    """A stale graph (its replay computes nothing new) gives other tokens in the probe: eager steps, one line."""
    loaded, reqs, eos = workload

    def frozen(body):
        body()
        return lambda: None
    with caplog.at_level(logging.INFO, logger="baer_fast"):
        dec = Decoder(loaded, eos_ids=eos, graph_capture=frozen)
    assert not dec.graphs
    assert [r.message for r in caplog.records if "captured steps" in r.message] == \
        ["decoder: eager decode steps; captured steps did not give the eager steps' tokens in the probe"]
    got = dec.generate(reqs[:2])
    assert got[1].tokens == Decoder(loaded, eos_ids=eos, graphs="off").generate(reqs[:2])[1].tokens


def test_graphs_off_by_default_on_cpu(qwen):
    assert not Decoder(qwen).graphs
    with pytest.raises(ValueError, match="graphs must be"):
        Decoder(qwen, graphs="on")
