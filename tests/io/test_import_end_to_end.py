"""Every pair importer end to end: import -> experts on a tiny model -> fit -> score -> eval --json."""
from __future__ import annotations

import gzip
import itertools
import json

from baer_fast.cli import main
from baer_fast.io.records import read_pairs, read_signals, write_pairs
from tests.fixtures.data import shared

FORMATS = ("rewardbench", "ultrafeedback", "mtbench-human", "arena", "table")
FIGURES = ("per_subset", "per_category", "bias", "calibration", "accuracy_ci")


def _hh_slice(tmp_path, n: int = 8):
    src = shared("hh_rlhf_helpful_base_test/helpful-base/test.jsonl.gz")
    (tmp_path / "hh" / "helpful-base").mkdir(parents=True)
    dst = tmp_path / "hh" / "helpful-base" / "test.jsonl.gz"
    with gzip.open(src, "rt", encoding="utf-8") as f, gzip.open(dst, "wt", encoding="utf-8") as g:
        g.writelines(itertools.islice(f, n))
    return tmp_path / "hh"


def test_every_importer_into_experts_and_eval(sources, qwen_dir, tmp_path, capsys):
    runs = {fmt: sources[fmt] for fmt in FORMATS}
    runs["hh-rlhf"] = (_hh_slice(tmp_path), [])
    everything = []
    for fmt, (src, args) in runs.items():
        assert main(["import", fmt, str(src), *args, "--out", str(tmp_path / fmt)]) == 0
        everything += read_pairs(str(tmp_path / fmt / "pairs.jsonl"))
    assert any(not isinstance(p.question, str) for p in everything)      # multi-turn pairs among them
    pairs = tmp_path / "all.jsonl"
    write_pairs(str(pairs), everything)
    signals = tmp_path / "signals.jsonl"
    assert main(["-q", "experts", "--model", qwen_dir, "--input", str(pairs), "--out", str(signals),
                 "--experts", "direct,pointwise"]) == 0
    recs = read_signals(str(signals))
    assert [r.id for r in recs] == [p.id for p in everything]     # computed in content order, written in input order
    category = {p.id: p.category for p in everything}
    assert all(r.category == category[r.id] for r in recs)
    head, scores = tmp_path / "head.json", tmp_path / "scores.jsonl"
    assert main(["-q", "fit", "--signals", str(signals), "--condition", "tiny", "--head", "stack",
                 "--out", str(head)]) == 0
    assert main(["-q", "score", "--signals", str(signals), "--head", str(head), "--out", str(scores)]) == 0
    capsys.readouterr()
    assert main(["eval", "--signals", str(signals), "--scores", str(scores), "--split", "all", "--json",
                 "--leaderboard", "rewardbench", "--bootstrap", "200"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert set(FIGURES) <= set(report)
    labelled = [p for p in everything if p.label in ("a", "b")]
    assert sum(g["n"] for g in report["per_subset"].values()) == len(labelled) == report["n_scored"]
    assert {"chat", "safety", "reasoning", "helpful", "writing"} <= set(report["per_category"])
    board = report["leaderboard"]
    assert {"Chat", "Chat Hard", "Safety", "Reasoning", "Score"} <= set(board["sections"])
    assert board["results"]["alpacaeval-easy"] == report["per_subset"]["alpacaeval-easy"]["accuracy"]
