import numpy as np
import pytest

from baer_fast.features.evidence import EPS, evidence, logit_clipped, stack_features


def test_definitions_match_the_paper_on_a_hand_example():
    u = np.array([[[0.9, 0.7], [0.2, np.nan], [np.nan, np.nan]]])   # [N=1, K=3, M=2]
    p, d, z, zt = evidence(u)
    assert p[0].tolist() == pytest.approx([0.8, 0.2, 0.5])
    assert d[0].tolist() == pytest.approx([0.2, 0.0, 0.0])
    assert z[0, 0] == pytest.approx(np.log(0.8 / 0.2))
    assert zt[0, 0] == pytest.approx(np.log(4.0) / (1 + 4 * 0.2))
    assert z[0, 2] == 0.0 and zt[0, 2] == 0.0          # missing -> p = .5 -> zero evidence


def test_hard_decisions_are_clipped_symmetrically_and_finite():
    z = logit_clipped(np.array([0.0, 1.0, EPS / 2, 1 - EPS / 2]))
    bound = np.log((1 - EPS) / EPS)
    assert np.all(np.isfinite(z))
    assert z.tolist() == pytest.approx([-bound, bound, -bound, bound])


def test_logit_is_odd_to_rounding():
    p = np.random.default_rng(0).random(10_000)
    from baer_fast.features.evidence import EPS
    from tests.fixtures.tolerances import fp64_tol
    # 1 - p rounds once, the logit's condition at the clip is 1 / (EPS (1 - EPS)), a few roundings more
    assert np.max(np.abs(logit_clipped(1 - p) + logit_clipped(p))) <= fp64_tol(8, 1 / (EPS * (1 - EPS)))


def test_stack_map_layout_and_unseen_subset():
    z = np.array([[1.0, 3.0], [2.0, 0.0]])
    zt = z / 2
    phi = stack_features(z, zt, ["chat", "other"], ["chat", "math"])
    assert phi.shape == (2, 2 * 2 + 2)
    assert phi[0].tolist() == [1.0, 0.5, 3.0, 1.5, 2.0, 0.0]   # zbar=2 on the chat column
    assert phi[1, 4:].tolist() == [0.0, 0.0]                    # unseen subset: no interaction


def test_delta_is_order_instability():
    u = np.array([[[1.0, 0.0]]])
    p, d, z, zt = evidence(u)
    assert (p[0, 0], d[0, 0], z[0, 0], zt[0, 0]) == (0.5, 1.0, 0.0, 0.0)
