"""Fused evidence features (Triton) and their torch reference against the numpy module of
record, `baer_fast.features.evidence`: fp64 and fp32 within their eps x the stated condition (_tols)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from baer_fast.features import evidence as numpy_ref
from baer_fast.kernels.evidence_features import evidence_features, evidence_features_ref

IMPLS = {"triton": evidence_features, "torch": evidence_features_ref}
CATEGORIES = ["chat", "code", "math", "safety"]
DTYPES = [torch.float64, torch.float32]


def _tols(dtype, m: int) -> tuple[float, float]:
    """(atol on p and delta, atol on z, zt and phi), from the dtype's eps: p and delta are a mean
    over m runs and a few more operations on values in [0, 1] (m + 8 roundings); z is the logit of
    p clipped to [EPS, 1 - EPS], whose condition there is 1 / (EPS (1 - EPS)) (0.5 - c cancels
    near the clip), plus its own few roundings at |z| <= logit(1 - EPS); zt, phi divide and sum it."""
    eps = torch.finfo(dtype).eps
    pd = (m + 8) * eps
    z_max = float(np.log(1 - numpy_ref.EPS) - np.log(numpy_ref.EPS))
    return pd, pd / (numpy_ref.EPS * (1 - numpy_ref.EPS)) + 8 * eps * z_max


def _runs(n: int, k: int, m: int, seed: int, missing: float = 0.3) -> np.ndarray:
    """u [N, K, M] with NaN holes, plus all-missing, hard-0, hard-1 and single-run rows."""
    rng = np.random.default_rng(seed)
    u = rng.random((n, k, m))
    u[rng.random(u.shape) < missing] = np.nan
    edge = [np.nan, 0.0, 1.0]
    for i in range(min(n, 3)):
        u[i] = edge[i]
    if n > 3:
        u[3, :, 1:] = np.nan
    return u


def _categories(n: int, seed: int) -> tuple[np.ndarray, list[str]]:
    """Per-row category index (-1 = unseen at fit time) and the subset names numpy expects."""
    idx = np.random.default_rng(seed).integers(-1, len(CATEGORIES), n)
    return idx, [CATEGORIES[i] if i >= 0 else "unseen" for i in idx]


def _check(out, u: np.ndarray, dtype: torch.dtype, subsets=None) -> None:
    p, delta, z, zt = numpy_ref.evidence(u)
    atol_pd, atol_z = _tols(dtype, u.shape[2])
    for name, got, want, atol in [("p", out.p, p, atol_pd), ("delta", out.delta, delta, atol_pd),
                                  ("z", out.z, z, atol_z), ("zt", out.zt, zt, atol_z)]:
        assert got.dtype == dtype and got.shape == want.shape, name
        np.testing.assert_allclose(got.double().cpu().numpy(), want, rtol=0, atol=atol,
                                   err_msg=name)
    if subsets is not None:
        phi = numpy_ref.stack_features(z, zt, subsets, CATEGORIES)
        np.testing.assert_allclose(out.phi.double().cpu().numpy(), phi, rtol=0, atol=atol_z)


@pytest.mark.parametrize("impl", list(IMPLS))
@pytest.mark.parametrize("dtype", DTYPES, ids=["fp64", "fp32"])
@pytest.mark.parametrize("n, k, m", [(1, 1, 1), (7, 3, 5), (37, 9, 3), (1000, 12, 10), (5, 17, 2)])
def test_matches_numpy_reference(impl, dtype, n, k, m, device):
    u = _runs(n, k, m, seed=n * k * m)
    cat, subsets = _categories(n, seed=n)
    out = IMPLS[impl](torch.from_numpy(u).to(device, dtype),
                      category=torch.from_numpy(cat).to(device), n_categories=len(CATEGORIES))
    _check(out, u, dtype, subsets)


@pytest.mark.parametrize("impl", list(IMPLS))
def test_edges_all_missing_and_hard_decisions(impl, device):
    u = np.array([[[np.nan, np.nan], [0.0, 0.0], [1.0, 1.0], [0.0, 1.0], [1.0, np.nan]]])
    out = IMPLS[impl](torch.from_numpy(u).to(device))
    _check(out, u, torch.float64)
    z_max = np.log(1 - numpy_ref.EPS) - np.log(numpy_ref.EPS)            # logit(1 - EPS)
    np.testing.assert_allclose(out.z.cpu().numpy()[0], [0.0, -z_max, z_max, 0.0, z_max], atol=_tols(torch.float64, 2)[1])
    np.testing.assert_allclose(out.delta.cpu().numpy()[0], [0.0, 0.0, 0.0, 1.0, 0.0], atol=0)
    assert out.phi is None


@pytest.mark.parametrize("impl", list(IMPLS))
def test_swapping_candidates_negates_z_and_keeps_delta(impl, device):
    """u -> 1 - u (the other display order's frame): z, zt negate, delta stays, p -> 1 - p."""
    u = torch.from_numpy(_runs(200, 6, 4, seed=1)).to(device)
    cat = torch.from_numpy(_categories(200, seed=1)[0]).to(device)
    fwd = IMPLS[impl](u, category=cat, n_categories=len(CATEGORIES))
    rev = IMPLS[impl](1.0 - u, category=cat, n_categories=len(CATEGORIES))
    atol_pd, atol_z = _tols(torch.float64, 4)         # each side's error, both sides: twice
    torch.testing.assert_close(rev.z, -fwd.z, rtol=0, atol=2 * atol_z)
    torch.testing.assert_close(rev.zt, -fwd.zt, rtol=0, atol=2 * atol_z)
    torch.testing.assert_close(rev.phi, -fwd.phi, rtol=0, atol=2 * atol_z)
    torch.testing.assert_close(rev.delta, fwd.delta, rtol=0, atol=2 * atol_pd)
    torch.testing.assert_close(rev.p, 1.0 - fwd.p, rtol=0, atol=2 * atol_pd)


def test_strided_runs_and_int32_categories(device):
    """A permuted (non-contiguous) u and int32 category ids give the same features."""
    u = _runs(50, 4, 6, seed=2)
    base = torch.from_numpy(np.ascontiguousarray(u.transpose(2, 0, 1))).to(device)  # [M, N, K]
    cat, subsets = _categories(50, seed=2)
    out = evidence_features(base.permute(1, 2, 0), category=torch.from_numpy(cat).int().to(device),
                            n_categories=len(CATEGORIES))
    _check(out, u, torch.float64, subsets)


def test_empty_shapes_and_no_run_axis(device):
    f64 = dict(dtype=torch.float64, device=device)
    assert evidence_features(torch.empty(0, 3, 2, **f64)).p.shape == (0, 3)
    out = evidence_features(torch.empty(4, 0, 2, **f64),
                            category=torch.zeros(4, dtype=torch.long, device=device),
                            n_categories=2)
    assert out.phi.shape == (4, 2) and not out.phi.any()
    with pytest.raises(ValueError, match="M == 0"):
        evidence_features(torch.empty(2, 3, 0, dtype=torch.float64, device=device))


def test_features_hook_keeps_numpy_semantics():
    """evidence(u, kernels=...): "torch" is the numpy code; "triton" (interpreted here) agrees."""
    u = _runs(64, 5, 3, seed=4)
    want = numpy_ref.evidence(u)
    for kernels in ("torch", "auto", "triton"):
        got = numpy_ref.evidence(u, kernels=kernels)
        for g, w in zip(got, want):
            assert isinstance(g, np.ndarray) and g.dtype == np.float64
            np.testing.assert_allclose(g, w, rtol=0, atol=2 * _tols(torch.float64, 3)[1])


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("dtype", DTYPES, ids=["fp64", "fp32"])
def test_compiled_kernel_large_batch(dtype):
    u = _runs(100_000, 16, 5, seed=5)
    cat, subsets = _categories(100_000, seed=5)
    out = evidence_features(torch.from_numpy(u).to("cuda", dtype),
                            category=torch.from_numpy(cat).cuda(), n_categories=len(CATEGORIES))
    _check(out, u, dtype, subsets)
