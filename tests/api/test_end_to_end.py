"""pairs -> experts (tiny judge) -> fit -> score (from signals, and from the model) -> eval -> Judge."""
import json

import pytest

from baer_fast.cli import main
from baer_fast.io.records import write_pairs

from tests.fixtures.data import synthetic_pairs


def _run(*argv):
    code = main(["-q", *map(str, argv)])
    assert code == 0, argv


def forward_scores(path):
    return {r["id"]: r["score"] for r in map(json.loads, open(path))}


@pytest.fixture(scope="module")
def pipeline(judge_dir, tmp_path_factory):
    d = tmp_path_factory.mktemp("e2e")
    pairs = d / "pairs.jsonl"
    write_pairs(str(pairs), synthetic_pairs(24, seed=5))
    _run("experts", "--model", judge_dir, "--input", pairs, "--out", d / "sig.jsonl", "--kernels", "torch")
    _run("fit", "--signals", d / "sig.jsonl", "--condition", "tiny", "--out", d / "head.json")
    _run("score", "--signals", d / "sig.jsonl", "--head", d / "head.json", "--out", d / "from_signals.jsonl")
    _run("score", "--model", judge_dir, "--input", pairs, "--head", d / "head.json", "--out",
         d / "from_model.jsonl", "--kernels", "torch")
    return d


def test_fit_freezes_the_derived_parameters(pipeline):
    art = json.loads((pipeline / "head.json").read_text())
    side = json.loads((pipeline / "sig.jsonl.derived.json").read_text())
    assert set(art["derived_params"]) == {"pride", "calibraeval"}
    assert art["derived_params"] == side


def test_score_from_the_model_equals_score_from_its_signals(pipeline):
    a, b = forward_scores(pipeline / "from_signals.jsonl"), forward_scores(pipeline / "from_model.jsonl")
    assert a.keys() == b.keys() and len(a) == 24
    assert max(abs(a[k] - b[k]) for k in a) < 1e-6


def test_judge_api_agrees_with_the_cli(pipeline, judge_dir):
    from baer_fast.api import Judge
    from baer_fast.io.records import read_pairs
    pairs = read_pairs(str(pipeline / "pairs.jsonl"))
    judge = Judge.from_pretrained(judge_dir, head=str(pipeline / "head.json"), kernels="torch")
    s = judge.score([p.question for p in pairs], [p.response_a for p in pairs], [p.response_b for p in pairs])
    cli = forward_scores(pipeline / "from_signals.jsonl")
    assert max(abs(float(v) - cli[p.id]) for v, p in zip(s, pairs)) < 1e-6


def test_eval_reads_it_all(pipeline, capsys):
    assert main(["eval", "--signals", str(pipeline / "sig.jsonl"), "--scores",
                 str(pipeline / "from_model.jsonl"), "--split", "all", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["n_scored"] == 24 and set(report["experts"]) >= {"direct", "score", "pointwise"}
