"""The O(V) sampler picks bit for bit what the sorting reference picks (sampling.pick_tokens_ref)."""
from types import SimpleNamespace

import pytest
import torch

from baer_fast.runtime import sampling
from baer_fast.runtime.sampling import pick_tokens, pick_tokens_ref


@pytest.fixture(autouse=True, params=["numba", "torch"])
def impl(request, monkeypatch):
    """Both implementations of the rule: the CPU kernel and the torch ops (the CUDA path)."""
    if request.param == "torch":
        monkeypatch.setattr(sampling, "_pick_cpu", sampling._pick_torch)
    return request.param


def _rows(temps, top_ps, us):
    return [SimpleNamespace(greedy=t <= 0, temperature=t, top_p=p, u=[u], out=[], wide=False)
            for t, p, u in zip(temps, top_ps, us)]


def _both(logits, temps, top_ps, us):
    """Two steps on the same logits (the second after the reference marked its wide rows) ->
    (new picks, reference picks), both steps concatenated."""
    t = torch.tensor(temps, dtype=torch.float32)
    p = torch.tensor(top_ps, dtype=torch.float32)
    u = torch.tensor(us, dtype=torch.float64)
    wide = torch.zeros(len(temps), dtype=torch.bool)
    got = pick_tokens(logits, t, p, u, wide).tolist() + pick_tokens(logits, t, p, u, wide).tolist()
    rows = _rows(temps, top_ps, us)
    ref = pick_tokens_ref(logits, rows) + pick_tokens_ref(logits, rows)
    assert wide.tolist() == [r.wide for r in rows]
    return got, ref


@pytest.mark.parametrize("vocab", [50, 1200, 32001, 151_936])
@pytest.mark.parametrize("seed", [0, 1])
def test_flat_and_peaked_rows_pick_what_the_reference_picks(vocab, seed):
    g = torch.Generator().manual_seed(seed * 1000 + vocab)
    scale = torch.tensor([12.0, 0.1, 6.0, 1.0, 30.0, 0.5, 3.0, 0.02, 2.0, 8.0])[:, None]
    logits = torch.randn(10, vocab, generator=g) * scale
    temps = [0.7, 1.0, 0.5, 1.3, 0.9, 0.7, 0.0, 2.0, 0.7, 0.3]
    top_ps = [0.95, 0.9, 1.0, 0.5, 0.99, 0.3, 1.0, 1.0, 1e-9, 0.95]
    us = torch.rand(10, generator=g, dtype=torch.float64).tolist()
    got, ref = _both(logits, temps, top_ps, us)
    assert got == ref


@pytest.mark.parametrize("temp", [0.4, 1.3])
def test_many_uniforms_on_a_model_like_distribution(temp):
    """Zipf-like logits (a trained model's shape), 48 uniforms, top-p 0.95 and 1.0."""
    g = torch.Generator().manual_seed(7)
    v = 32_000
    logits = -1.1 * torch.log(torch.arange(1, v + 1, dtype=torch.float32)) + 0.3 * torch.randn(v, generator=g)
    logits = logits[torch.randperm(v, generator=g)]
    n = 48
    us = torch.rand(n, generator=g, dtype=torch.float64).tolist()
    for top_p in (0.95, 1.0, 0.6):
        got, ref = _both(logits.expand(n, -1).contiguous(), [temp] * n, [top_p] * n, us)
        assert got == ref


def test_ties_at_the_cutoff():
    """Runs of exactly equal probabilities straddling the top-p cutoff (bf16-like logits), and a
    cutoff between two tie runs."""
    g = torch.Generator().manual_seed(3)
    v = 4096
    levels = torch.tensor([4.0, 3.0, 2.5, 2.0, 1.0, 0.0])
    logits = levels[torch.randint(0, len(levels), (v,), generator=g)]
    probs = torch.softmax(logits, -1)
    # cutoffs just inside, at and between the tie runs' cumulative masses
    ps, _ = probs.sort(descending=True)
    cum = ps.double().cumsum(0)
    cuts = [float(cum[k]) for k in (3, 40, 200, 900, 2000)] + [float(cum[k]) + 1e-7 for k in (40, 900)]
    n = 16
    us = torch.rand(n, generator=g, dtype=torch.float64).tolist()
    for cut in cuts + [0.5, 0.95]:
        got, ref = _both(logits.expand(n, -1).contiguous(), [1.0] * n, [min(cut, 1.0)] * n, us)
        assert got == ref


def test_greedy_rows_take_the_argmax_and_tiny_top_p_the_top_token():
    g = torch.Generator().manual_seed(5)
    logits = torch.randn(6, 999, generator=g) * 3
    got, ref = _both(logits, [0.0, 0.8, 0.0, 1.2, 0.5, 0.0], [1.0, 1e-9, 0.9, 1e-9, 0.7, 0.2], [0.3] * 6)
    assert got == ref
    got = got[:6]
    top = logits.argmax(-1).tolist()
    assert [got[k] for k in (0, 1, 2, 3, 5)] == [top[k] for k in (0, 1, 2, 3, 5)]


def test_near_tie_order_flip_leaves_the_pick_alone():
    """Two tokens a hair apart swap places in probability order; the pick moves only for a u inside that hair."""
    g = torch.Generator().manual_seed(0)
    base = torch.randn(1, 300, generator=g) * 0.5
    base[0, 7] = base[0, 150] = 2.0
    one, other = base.clone(), base.clone()
    one[0, 7] += 1e-5
    other[0, 150] += 1e-5
    us = torch.rand(200, generator=g, dtype=torch.float64)
    for top_p in (1.0, 0.9):
        t, p = torch.ones(200), torch.full((200,), top_p)
        a = pick_tokens(one.expand(200, -1).contiguous(), t, p, us)
        b = pick_tokens(other.expand(200, -1).contiguous(), t, p, us)
        assert bool((a == b).all())
