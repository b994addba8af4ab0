"""The vectorised and memoised paths eval (and fit) take at scale equal plain loops, bit for bit.

Each reference below is the loop the fast path replaced; the records mix what the loops handled
one case at a time: null runs, absent experts, ragged and odd run lists, exact 0.5 runs, ties.
"""
from __future__ import annotations

import json
import random

import numpy as np
import pytest

from baer_fast.eval.bias import position_consistency
from baer_fast.eval.figures import figures
from baer_fast.eval.metrics import evaluate, expert_predictions, label_signs
from baer_fast.features.evidence import MemoRecords, group_block, run_counts, runs_tensor
from baer_fast.heads.single import native_credit
from baer_fast.io.records import Signals, read_signals
from baer_fast.io.splits import roles
from baer_fast.protocols.base import snap

EXPERTS = ["e0", "e1", "e2", "odd"]


def _records(n: int, seed: int = 0, ragged: bool = True) -> list:
    rng, out = random.Random(seed), []
    for i in range(n):
        ex = {}
        for name in EXPERTS:
            if ragged and rng.random() < 0.1:
                continue                                   # expert absent on this pair
            m = (3 if name == "odd" else rng.choice((2, 4))) if ragged else 2
            ex[name] = [None if rng.random() < 0.1 else rng.choice((0.0, 0.5, 1.0, round(rng.random(), 6)))
                        for _ in range(m)]
        out.append(Signals(f"p{i:04d}", ex, subset=rng.choice("xyz"), label=rng.choice(("a", "b", "tie", None)),
                           meta={"len_a": rng.randint(1, 99), "len_b": rng.randint(1, 99),
                                 "expert_cost": {"e0": {"prefilled": 5}}},
                           category=rng.choice(("c1", "c2", None))))
    return out


def runs_ref(records, experts) -> np.ndarray:
    m = max((len(r.experts.get(k, ())) for r in records for k in experts), default=1)
    u = np.full((len(records), len(experts), max(m, 1)), np.nan)
    for i, rec in enumerate(records):
        for k, name in enumerate(experts):
            for j, val in enumerate(rec.experts.get(name, ())):
                if val is not None:
                    u[i, k, j] = snap(val)          # runs_tensor puts runs on the swap-exact grid
    return u


def native_ref(records, experts, y) -> np.ndarray:
    out = np.zeros((len(records), len(experts)))
    for i, rec in enumerate(records):
        for k, name in enumerate(experts):
            runs = rec.experts.get(name) or ()
            if runs:
                out[i, k] = sum(1 for u in runs if u is not None and np.sign(u - 0.5) == y[i]) / len(runs)
    return out


def position_ref(records, experts, rows) -> dict:
    out = {}
    for name in experts:
        n = n_dis = n_dec = n_first = 0
        for r, keep in zip(records, rows):
            runs = r.experts.get(name) if keep else None
            if not runs or len(runs) < 2 or len(runs) % 2:
                continue
            for u_ab, u_ba in zip(runs[0::2], runs[1::2]):
                if u_ab is None or u_ba is None:
                    continue
                n += 1
                n_dis += np.sign(u_ab - 0.5) != np.sign(u_ba - 0.5)
                n_dec += (u_ab != 0.5) + (u_ba != 0.5)
                n_first += (u_ab > 0.5) + (u_ba < 0.5)
        out[name] = {"n_run_pairs": n, "disagree": int(n_dis), "consistency": float(1.0 - n_dis / n) if n else None,
                     "first_shown_rate": float(n_first / n_dec) if n_dec else None}
    return out


@pytest.mark.parametrize("ragged", [True, False])
def test_runs_tensor_counts_and_native_credit_equal_the_loops(ragged):
    recs = _records(300, seed=1, ragged=ragged)
    for experts in (EXPERTS, ["e1"], ["missing"], []):
        assert np.array_equal(runs_tensor(recs, experts), runs_ref(recs, experts), equal_nan=True)
        want = [[len(r.experts.get(k, ())) for k in experts] for r in recs]
        assert np.array_equal(run_counts(recs, experts), np.array(want, np.int64).reshape(len(recs), len(experts)))
    for y in (label_signs(recs), label_signs(recs).astype(np.float64)):
        assert np.array_equal(native_credit(recs, EXPERTS, y), native_ref(recs, EXPERTS, y))
    assert runs_tensor([], EXPERTS).shape == (0, len(EXPERTS), 1)


def test_position_consistency_equals_the_loop():
    recs = _records(400, seed=2)
    rows = np.array([i % 3 != 0 for i in range(len(recs))])
    assert position_consistency(recs, EXPERTS, rows) == position_ref(recs, EXPERTS, rows)
    assert position_consistency(recs, EXPERTS, np.zeros(len(recs), bool)) == \
        position_ref(recs, EXPERTS, np.zeros(len(recs), bool))


def test_group_block_equals_the_loop():
    rng = np.random.default_rng(3)
    values = [rng.choice(["x", "y", "z", "unseen"]) for _ in range(200)] + [None]
    zbar = rng.normal(size=len(values))
    want = np.zeros((len(values), 3))
    for i, g in enumerate(values):
        if g in ("x", "y", "z"):
            want[i, "xyz".index(g)] = zbar[i]
    assert np.array_equal(group_block(values, ["x", "y", "z"], zbar), want)


def test_memo_records_give_every_eval_figure_unchanged(tmp_path):
    recs = _records(500, seed=4)
    memo = MemoRecords(recs)
    scores = np.random.default_rng(5).normal(size=len(recs))
    scores[::37] = 0.0
    rl = roles(recs)

    def everything(rs):
        return json.dumps({"eval": evaluate(rs, scores, rl, split="all"),
                           "figures": figures(rs, scores, rl, split="all", experts=EXPERTS)}, sort_keys=True)
    assert everything(memo) == everything(recs)
    assert everything(memo) == everything(memo)                 # second reads come from the memo
    assert not expert_predictions(memo, EXPERTS).flags.writeable
    assert not runs_tensor(memo, EXPERTS).flags.writeable


def test_read_signals_keeps_only_the_meta_asked_for_yet_checks_all(tmp_path):
    path = tmp_path / "s.jsonl"
    recs = _records(5, seed=6)
    path.write_text("".join(json.dumps(r.to_json()) + "\n" for r in recs))
    slim = read_signals(str(path), meta_keys=("len_a", "split_group"))
    full = read_signals(str(path))
    assert [r.meta for r in slim] == [{"len_a": r.meta["len_a"]} for r in full]
    assert [(r.id, r.experts, r.label, r.subset, r.category, r.line) for r in slim] == \
        [(r.id, r.experts, r.label, r.subset, r.category, r.line) for r in full]
    bad = recs[0].to_json()
    bad["meta"]["expert_cost"]["e0"]["prefilled"] = -1
    path.write_text(json.dumps(bad) + "\n")
    from baer_fast.errors import InputError
    with pytest.raises(InputError, match="expert_cost.e0.prefilled"):
        read_signals(str(path), meta_keys=("len_a",))
