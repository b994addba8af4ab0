"""The default head on synthetic signals: odd under the swap, batch-independent, no fitting."""
import numpy as np
from hypothesis import given, settings, strategies as st

from baer_fast.heads.default import DefaultHead
from baer_fast.io.records import Signals

runs = st.lists(st.one_of(st.none(), st.floats(0, 1)), min_size=1, max_size=3)


def _record(i, experts):
    return Signals(f"p{i}", experts)


def _swap(experts):
    return {k: [None if u is None else 1.0 - u for u in reversed(v)] for k, v in experts.items()}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.fixed_dictionaries({"direct": runs, "score": runs}), min_size=1, max_size=6))
def test_swap_negates_and_batch_mates_do_not_matter(rows):
    head = DefaultHead()
    recs = [_record(i, r) for i, r in enumerate(rows)]
    s = head.score(recs)
    swapped = head.score([_record(i, _swap(r)) for i, r in enumerate(rows)])
    assert np.all(np.abs(s + swapped) <= 1e-9)              # DESIGN: |s(Tx) + s(x)| <= 1e-9 in float64
    alone = np.array([head.score([r])[0] for r in recs])
    assert np.array_equal(s, alone)
