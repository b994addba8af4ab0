"""fit's memos (inner folds per training set, runs tensors per expert list) return what the plain calls do."""
from __future__ import annotations

import numpy as np

from baer_fast.features.evidence import MemoRecords
from baer_fast.heads import head_class
from baer_fast.selection.fit import fit_condition
from baer_fast.selection.nested import INNER_FOLDS, SALT, dev_data, fold_assignments, inner_folds, oof_scores

from tests.heads.synth import specialist_signals

KW = dict(stack_experts=["c", "g1", "g2", "m"], route_experts=["c", "g1", "g2", "m"], categories=["chat", "math"])


def _data(rows):
    return dev_data(rows, np.array([1.0 if r.label == "a" else -1.0 for r in rows]), **KW)


def test_inner_folds_are_the_hashed_folds_once_per_training_set_and_read_only():
    data = _data(specialist_signals(80, seed=3))
    tr = np.flatnonzero(np.arange(80) % 5 != 2)
    first = inner_folds(data, tr)
    ref = fold_assignments([data.ids[i] for i in tr], INNER_FOLDS, 1, SALT + ":inner")[0]
    assert np.array_equal(first, ref) and inner_folds(data, tr) is first and not first.flags.writeable
    other = np.flatnonzero(np.arange(80) % 5 != 3)
    assert np.array_equal(inner_folds(data, other),
                          fold_assignments([data.ids[i] for i in other], INNER_FOLDS, 1, SALT + ":inner")[0])


def test_out_of_fold_scores_do_not_depend_on_what_the_memo_already_holds():
    rows = specialist_signals(90, seed=5)
    folds = fold_assignments([r.id for r in rows], 5, 2)
    shared = _data(rows)
    for cand in ("shrunk", "stack", "route"):
        s_shared, c_shared = oof_scores(shared, cand, folds)            # memo filled by the candidates before
        s_fresh, c_fresh = oof_scores(_data(rows), cand, folds)
        assert np.array_equal(s_shared, s_fresh) and c_shared == c_fresh


def test_every_fitted_head_scores_memo_records_as_it_scores_a_plain_list():
    rows = specialist_signals(70, seed=8)
    art = fit_condition(rows, condition="x")
    memo = MemoRecords(rows)
    for name, d in art["heads"].items():
        head = head_class(d["kind"]).from_json(d)
        plain = head.score(list(rows))
        assert np.array_equal(head.score(memo), plain) and np.array_equal(head.score(memo), plain), name
