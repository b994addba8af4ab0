"""Reference-verification head: s_ref = logit v(a) - logit v(b) (Eq. 9, no clip); odd under swap; round trip."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from baer_fast.features.evidence import logit_clipped
from baer_fast.heads import head_class
from baer_fast.heads.reference import ReferenceHead
from baer_fast.io.records import Signals

prob = st.one_of(st.none(), st.floats(0.0, 1.0), st.sampled_from([0.0, 0.5, 1.0]))


@settings(max_examples=200, deadline=None)
@given(st.lists(prob, min_size=1, max_size=4), st.lists(prob, min_size=1, max_size=4))
def test_reference_score_negates_under_swap(ref_runs, other_runs):
    rec = Signals("x", {"reference": ref_runs, "other": other_runs})
    head = ReferenceHead("reference")
    assert abs(head.score([rec])[0] + head.score([rec.swapped()])[0]) <= 1e-9


def test_score_is_the_reference_experts_log_odds_and_missing_is_zero():
    v_a, v_b = 0.9, 0.3                                      # Eq. 9: u = sigma(logit v(a) - logit v(b))
    u = 1 / (1 + np.exp(-(np.log(v_a / (1 - v_a)) - np.log(v_b / (1 - v_b)))))
    recs = [Signals("a", {"reference": [u]}), Signals("b", {"other": [0.9]})]
    s = ReferenceHead("reference").score(recs)
    np.testing.assert_allclose(s[0], np.log(v_a / (1 - v_a)) - np.log(v_b / (1 - v_b)), rtol=1e-12)
    assert s[1] == 0.0


def test_score_is_not_clipped_like_the_stack_evidence():
    u = 1 / (1 + np.exp(-12.0))                              # beyond the stack's |z| <= logit(1 - EPS) = 6.9
    s = ReferenceHead("reference").score([Signals("a", {"reference": [u]})])[0]
    assert abs(s - 12.0) <= 1e-9 and abs(logit_clipped(u)) < 7


def test_round_trip_through_head_class():
    head = ReferenceHead("verify", eps=1e-3)
    again = head_class("reference").from_json(head.to_json())
    assert again == head
