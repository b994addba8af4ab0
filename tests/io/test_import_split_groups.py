"""Votes and battles on the same comparison share one split role (`meta.split_group`): several
people judging the same texts must not put them on both sides of fit and test."""
from __future__ import annotations

import csv
import json
from collections import defaultdict

from baer_fast.io.adapters import load
from baer_fast.io.splits import roles

from tests.io.schemas import ARENA, MTBENCH, write_jsonl


def _roles_by_group(pairs, key) -> dict:
    out = defaultdict(set)
    for p, r in zip(pairs, roles(pairs)):
        out[key(p)].add(r)
    return out


def test_mtbench_votes_on_one_comparison_share_a_split_role(tmp_path):
    """FastChat's human split holds several judges' votes per (question, turn, model pair), the
    pair in either order: 3 comparisons x 2 turns x 10 votes here."""
    rows = []
    for qid in (81, 82, 83):
        for turn in (1, 2):
            for k in range(10):
                swap = k % 2 == 1
                a, b = MTBENCH[0]["conversation_a"], MTBENCH[0]["conversation_b"]
                rows.append(dict(MTBENCH[0], question_id=qid, turn=turn, judge=f"expert_{k}",
                                 model_a="gpt-3.5-turbo" if swap else "alpaca-13b",
                                 model_b="alpaca-13b" if swap else "gpt-3.5-turbo",
                                 conversation_a=b if swap else a, conversation_b=a if swap else b))
    pairs = load("mtbench-human", str(write_jsonl(tmp_path / "mt.jsonl", rows))).pairs
    groups = {p.meta["split_group"] for p in pairs}
    assert groups == {f"mtbench-{q}-t{t}-alpaca-13b|gpt-3.5-turbo" for q in (81, 82, 83) for t in (1, 2)}
    by_comparison = _roles_by_group(pairs, lambda p: (p.id.split("-")[1], p.subset))
    assert len(by_comparison) == 6 and all(len(r) == 1 for r in by_comparison.values()), by_comparison


def test_arena_battles_of_one_prompt_and_model_pair_share_a_split_role(tmp_path):
    """The same prompt put to the same two models (either order) in many battles, as common prompts
    are in Chatbot Arena; a different prompt or model pair is another group."""
    rows = []
    for k in range(12):
        row = dict(ARENA[0], question_id=f"hello-{k}", judge=f"arena_user_{k}")
        if k % 2:
            row.update(model_a=row["model_b"], model_b=row["model_a"],
                       conversation_a=row["conversation_b"], conversation_b=row["conversation_a"])
        rows.append(row)
    rows += [dict(ARENA[0], question_id="other-pair", model_b="vicuna-13b"),
             dict(ARENA[2], question_id="other-prompt", model_a="chatglm-6b", model_b="koala-13b")]
    pairs = load("arena", str(write_jsonl(tmp_path / "battles.jsonl", rows))).pairs
    groups = [p.meta["split_group"] for p in pairs]
    assert len(set(groups[:12])) == 1 and len(set(groups)) == 3
    assert len({r for p, r in zip(pairs, roles(pairs)) if p.id.startswith("arena-hello")}) == 1


def test_arena_55k_duplicate_rows_share_a_split_role(tmp_path):
    head = ["id", "model_a", "model_b", "prompt", "response_a", "response_b",
            "winner_model_a", "winner_model_b", "winner_tie"]
    prompt, ra, rb = json.dumps(["Name a prime"]), json.dumps(["7"]), json.dumps(["11"])
    with open(tmp_path / "train.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(head)
        w.writerows([[i, "gpt-4", "koala-13b", prompt, ra, rb, 1, 0, 0] for i in range(10)])
        w.writerows([[10 + i, "koala-13b", "gpt-4", prompt, rb, ra, 0, 1, 0] for i in range(10)])
        w.writerow([99, "gpt-4", "claude-2", prompt, ra, rb, 1, 0, 0])
    pairs = load("arena", str(tmp_path / "train.csv")).pairs
    groups = [p.meta["split_group"] for p in pairs]
    assert len(set(groups[:20])) == 1 and groups[20] != groups[0]
    assert len(set(roles(pairs[:20]))) == 1
    with open(tmp_path / "test.csv", "w", newline="", encoding="utf-8") as f:       # no model names
        csv.writer(f).writerows([["id", "prompt", "response_a", "response_b"], [1, prompt, ra, rb],
                                 [2, prompt, rb, ra], [3, prompt, ra, json.dumps(["13"])]])
    unlabelled = load("arena", str(tmp_path / "test.csv")).pairs
    assert [p.meta["split_group"] == unlabelled[0].meta["split_group"] for p in unlabelled] == [True, True, False]
