"""Router head: candidate symmetry (hypothesis), reliability features, CV, artifact round trip."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from baer_fast import artifact
from baer_fast.errors import ArtifactError
from baer_fast.features.reliability import agreement, reliability_feature_names, reliability_features, signs
from baer_fast.heads.router import RouterHead, fit_model, fit_router, routing_targets
from baer_fast.io.records import Signals

from .synth import SUBSETS, specialist_signals

EXPERTS = ["c", "g1", "g2", "m"]
_HEADS = {}


def fitted(kind: str) -> RouterHead:
    """A router of each model kind fitted once on synthetic specialists."""
    if kind not in _HEADS:
        rows = specialist_signals(240, seed=1)
        y = np.array([1.0 if r.label == "a" else -1.0 for r in rows])
        rho = reliability_features(rows, EXPERTS, list(SUBSETS))
        _HEADS[kind] = RouterHead(EXPERTS, list(SUBSETS), fit_model(kind, rho, routing_targets(rows, EXPERTS, y)))
    return _HEADS[kind]


prob = st.one_of(st.none(), st.floats(0.0, 1.0), st.sampled_from([0.0, 0.5, 1.0, 0.25, 0.75]))
runs = st.lists(prob, min_size=1, max_size=6)
count = st.integers(0, 5000)
meta = st.fixed_dictionaries({"len_q": count, "len_a": count, "len_b": count, "code_a": count,
                              "code_b": count, "list_a": count, "list_b": count, "digits_a": count,
                              "digits_b": count})
signals = st.builds(
    lambda ex, subset, m: Signals("x", ex, subset=subset, meta=m),
    st.dictionaries(st.sampled_from(EXPERTS + ["extra"]), runs, min_size=0, max_size=5),
    st.sampled_from(["chat", "math", "unseen"]), meta)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(signals, st.sampled_from(["forest", "logistic"]))
def test_swap_keeps_expert_and_negates_score(rec, kind):
    head = fitted(kind)
    sw = rec.swapped()
    assert head.chosen_experts([rec]) == head.chosen_experts([sw])
    assert abs(head.score([rec])[0] + head.score([sw])[0]) <= 1e-9


@settings(max_examples=200, deadline=None)
@given(signals)
def test_reliability_features_are_candidate_invariant(rec):
    rho = reliability_features([rec], EXPERTS, list(SUBSETS))
    np.testing.assert_array_equal(reliability_features([rec.swapped()], EXPERTS, list(SUBSETS)), rho)
    assert rho.shape == (1, len(EXPERTS), len(reliability_feature_names(EXPERTS, SUBSETS)))
    assert np.isfinite(rho).all()


def test_agreement_is_sign_free_share_of_other_decided_experts():
    sg = signs(np.array([[0.9, 0.8, 0.1, 0.5]]))         # + + - undecided
    np.testing.assert_allclose(agreement(sg), [[0.5, 0.5, 0.0, 0.5]])
    np.testing.assert_allclose(agreement(-sg), agreement(sg))


def test_ties_in_reliability_go_to_the_first_expert():
    head = fitted("logistic")
    flat = RouterHead(EXPERTS, list(SUBSETS), type(head.model)(np.zeros_like(head.model.coef), 0.0,
                                                               head.model.mean, head.model.scale))
    rows = specialist_signals(20, seed=5)
    assert flat.chosen_experts(rows) == [EXPERTS[0]] * 20


def test_router_finds_the_specialists():
    head = fitted("forest")
    rows = specialist_signals(300, seed=9)
    chosen = head.chosen_experts(rows)
    want = {"math": "m", "chat": "c"}
    share = np.mean([k == want[r.subset] for k, r in zip(chosen, rows)])
    assert share > 0.7
    y = np.array([1 if r.label == "a" else -1 for r in rows])
    assert np.mean(np.where(head.score(rows) >= 0, 1, -1) == y) > 0.9


def test_targets_count_undecided_as_wrong():
    rec = Signals("u", {"k": [0.5, 0.5], "j": [0.9]}, label="a")
    np.testing.assert_array_equal(routing_targets([rec], ["k", "j"], np.array([1.0])), [[0, 1]])


def test_fit_router_is_deterministic_and_reports_both_models():
    rows = specialist_signals(120, seed=2)
    y = np.array([1.0 if r.label == "a" else -1.0 for r in rows])
    folds = np.arange(len(rows)) % 5
    h1, i1 = fit_router(rows, y, experts=EXPERTS, categories=list(SUBSETS), folds=folds)
    h2, i2 = fit_router(rows, y, experts=EXPERTS, categories=list(SUBSETS), folds=folds)
    assert h1.to_json() == h2.to_json()
    assert set(i1["cv_routed_accuracy"]) == {"logistic", "forest"}
    assert i1["model"] in ("logistic", "forest") and len(i1["cv_correct"]) == len(rows)


@pytest.mark.parametrize("kind", ["forest", "logistic"])
def test_artifact_round_trip_gives_identical_scores(kind, tmp_path):
    head = fitted(kind)
    path = tmp_path / "h.json"
    artifact.save(str(path), {"condition": "t", "head": "route", "heads": {"route": head.to_json()},
                              "experts": EXPERTS})
    loaded = artifact.deployed_head(artifact.load(str(path)))
    rows = specialist_signals(64, seed=4)
    np.testing.assert_array_equal(loaded.score(rows), head.score(rows))
    assert loaded.chosen_experts(rows) == head.chosen_experts(rows)


def test_tampered_or_truncated_artifact_fails_clearly(tmp_path):
    head = fitted("forest")
    path = tmp_path / "h.json"
    artifact.save(str(path), {"condition": "t", "head": "route", "heads": {"route": head.to_json()},
                              "experts": EXPERTS})
    text = path.read_text()
    d = artifact.load(str(path))
    d["heads"]["route"]["model"]["threshold"][0] += 1.0
    bad = tmp_path / "tampered.json"
    import json
    bad.write_text(json.dumps(d))
    with pytest.raises(ArtifactError, match="checksum"):
        artifact.load(str(bad))
    cut = tmp_path / "cut.json"
    cut.write_text(text[: len(text) // 2])
    with pytest.raises(ArtifactError, match="truncated or corrupt"):
        artifact.load(str(cut))
    d = artifact.load(str(path))
    d["heads"]["route"]["model"]["left"][0] = -5                 # checksum recomputed, arrays broken
    d.pop("checksum")
    artifact.save(str(bad), d)
    with pytest.raises(ArtifactError, match="malformed"):
        artifact.deployed_head(artifact.load(str(bad)))
