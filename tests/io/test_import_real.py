"""Importers against the published files in ../shared/data, checked with upstream's own numbers."""
import json
import re

import numpy as np
import pytest

from baer_fast.eval.metrics import expert_predictions, label_signs
from baer_fast.io.adapters import load
from baer_fast.io.records import read_signals

from tests.fixtures.data import shared


def _upstream_count(stat: str) -> int:
    return int(re.match(r"(\d+) /", stat).group(1))


def test_llmbar_runs_reproduce_upstream_per_order_accuracy():
    src = shared("llmbar_natural/LLMBar/Natural")
    imported = load("llmbar", str(src))
    assert len(imported.pairs) == 100 and len(imported.banks) == 6
    y = label_signs(imported.pairs)
    checked = 0
    for backbone, signals in imported.banks.items():
        for proto in sorted({k for s in signals for k in s.experts}):
            stats = json.loads((src / "evaluators" / backbone / proto / "statistics.json").read_text())
            runs = np.array([[np.nan if u is None else u for u in s.experts[proto]] for s in signals])
            for order, key in ((0, "correct_False"), (1, "correct_True")):
                correct = np.sum(np.sign(runs[:, order] - 0.5) == y)
                assert correct == _upstream_count(stats[key]), (backbone, proto, key)
            checked += 1
    assert checked == 65


def test_judgebench_matches_upstream_scoring_rule():
    """README: o1-mini 65.7%, GRM-Gemma-2B 59.4%, ... under 'sum of both orders > 0'."""
    imported = load("judgebench", str(shared("judgebench_gpt4o")))
    (condition, signals), = imported.banks.items()
    experts = sorted(signals[0].experts)
    acc = (expert_predictions(signals, experts) == label_signs(signals)[:, None]).mean(0)
    got = {e.split(":")[1]: round(100 * a, 1) for e, a in zip(experts, acc)}
    assert got["o1-mini-2024-09-12"] == 65.7
    assert got["Ray2333_GRM-Gemma-2B-rewardmodel-ft"] == 59.4
    assert got["Skywork_Skywork-Reward-Gemma-2-27B"] == 64.3
    assert got["Skywork_Skywork-Reward-Llama-3.1-8B"] == 62.3
    assert got["internlm_internlm2-20b-reward"] == 63.4
    assert got["internlm_internlm2-7b-reward"] == 59.4
    assert {s.subset for s in signals} == {"knowledge", "reasoning", "math", "coding"}


def test_autoj_exchange_file_is_mapped_from_displayed_position():
    imported = load("autoj", str(shared("autoj_pairwise_test")))
    assert len(imported.pairs) == 721
    labels = [p.label for p in imported.pairs]
    assert (labels.count("a"), labels.count("b"), labels.count("tie")) == (260, 270, 191)
    runs = np.array([[np.nan if u is None else u for u in s.experts["autoj-13b"]]
                     for s in imported.banks["autoj-13b"]])
    # A consistent judge agrees with itself across orders far more often than chance once the
    # exchange file is mapped back; mapping it wrongly would make agreement the exception.
    assert np.mean(runs[:, 0] == runs[:, 1]) > 0.6


def test_pandalm_majority_labels_and_single_order():
    imported = load("pandalm", str(shared("pandalm_testset")))
    labels = [p.label for p in imported.pairs]
    assert (labels.count("b"), labels.count("a"), labels.count("tie")) == (254, 208, 50)
    sig = imported.banks["pandalm-bank"]
    assert all(len(s.experts["gpt-3.5-turbo"]) == 1 for s in sig)


@pytest.mark.parametrize("kind,rel", [("llmbar", "llmbar_natural/LLMBar/Natural"),
                                      ("judgebench", "judgebench_gpt4o"),
                                      ("autoj", "autoj_pairwise_test"),
                                      ("pandalm", "pandalm_testset")])
def test_import_fit_score_eval_end_to_end(cli, tmp_path, kind, rel):
    src = shared(rel)
    out = tmp_path / kind
    code, stdout, err = cli("import", kind, src, "--out", out)
    assert code == 0, err
    sig_files = sorted(out.glob("signals.*.jsonl"))
    assert sig_files and (out / "pairs.jsonl").exists()
    sig = sig_files[0]
    head, scores = out / "head.json", out / "scores.jsonl"
    assert cli("fit", "--signals", sig, "--condition", kind, "--out", head)[0] == 0
    assert cli("score", "--signals", sig, "--head", head, "--out", scores)[0] == 0
    code, table, err = cli("eval", "--signals", sig, "--scores", scores)
    assert code == 0, err
    assert "strongest baseline on this split" in table and "native" in table
    code, js, _ = cli("eval", "--signals", sig, "--scores", scores, "--json")
    report = json.loads(js)
    best = report["strongest_baseline"]
    m = report["experts"][best["expert"]]
    assert best["accuracy"] == max(m["accuracy_strict"], m["accuracy_native"])
    assert all(report["experts"][e]["accuracy_fair"] <= best["accuracy"] for e in report["baseline_pool"])
    n_ties = sum(s.label == "tie" for s in read_signals(str(sig)))
    assert report["coverage"] == 1.0 and 0.0 <= report["accuracy"] <= 1.0
    if n_ties:
        assert report["n_tie_labels"] > 0
