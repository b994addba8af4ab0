"""The exact sign-flip test stays linear in the pairs: 80k test pairs once took minutes per call."""
import time

import numpy as np
from scipy.stats import binom

from baer_fast.eval import metrics
from baer_fast.eval.metrics import sign_flip_exact


def _dense_p(credit_x, credit_y, scale):
    """The textbook enumeration: one dense convolution per distinct |d|."""
    d = np.rint((credit_x - credit_y) * scale).astype(np.int64)
    a, obs, dist, total = np.abs(d[d != 0]), int(d.sum()), np.ones(1), 0
    for v, c in zip(*np.unique(a, return_counts=True)):
        part = np.zeros(2 * v * c + 1)
        part[::2 * v] = binom.pmf(np.arange(c + 1), c, 0.5)
        dist, total = np.convolve(dist, part), total + v * c
    s = np.arange(-total, total + 1)
    return float(min(1.0, dist[np.abs(s) >= abs(obs)].sum())) if total else 1.0


def _credits(n, seed, close):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 11, n) / 10
    x = y.copy() if close else (rng.random(n) < 0.8).astype(float)
    if close:
        flip = rng.random(n) < 0.3
        x[flip] = np.clip(y[flip] + rng.choice([-0.1, 0.1, 0.2], flip.sum()), 0, 1)
    return x, y


def test_lattice_path_matches_the_dense_enumeration(monkeypatch):
    monkeypatch.setattr(metrics, "DENSE_WORK", 0)           # force the sparse path on small inputs
    for n, seed, close in [(40, 0, False), (300, 1, True), (2500, 2, False), (2500, 3, True)]:
        x, y = _credits(n, seed, close)
        want = _dense_p(x, y, 10)
        got = sign_flip_exact(x, y, 10)["p_value"]
        assert got == want or abs(got - want) <= 1e-12 * max(want, 1e-300), (n, got, want)


def test_small_inputs_keep_the_dense_bits():
    x, y = _credits(500, 4, True)
    assert sign_flip_exact(x, y, 10)["p_value"] == _dense_p(x, y, 10)


def test_large_input_is_fast():
    x, y = _credits(40_000, 5, False)          # dense enumeration: ~15 s of CPU; sparse: well under 2
    t = time.process_time()
    p = sign_flip_exact(x, y, 10)["p_value"]
    assert time.process_time() - t < 4.0
    assert 0.0 <= p <= 1.0
