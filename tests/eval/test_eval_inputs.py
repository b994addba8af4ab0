"""`baer-fast eval` refuses inputs that do not belong together and says what it left out.

The split comes from --head (a training row is never measured as a test row); scores of another
head or condition, a scores file mixing two, and signals without the head's experts are errors;
no labelled row is an error (and the library's report stays valid JSON); --on-error skip
evaluates the scored pairs and counts the rest; bad option values fail at the command line.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import math

import pytest

from baer_fast.cli import main
from baer_fast.io.jsonl import iter_jsonl, write_jsonl


@pytest.fixture(scope="module")
def s42(llmbar, tmp_path_factory):
    """A head fitted on the split seeded 's42' and its scores (written by `score`, with its progress record)."""
    d = tmp_path_factory.mktemp("s42")
    head, scores = str(d / "g42.json"), str(d / "g42.sc.jsonl")
    assert main(["-q", "fit", "--signals", llmbar["signals"], "--condition", "g", "--split-seed", "s42",
                 "--out", head]) == 0
    assert main(["-q", "score", "--signals", llmbar["signals"], "--head", head, "--out", scores]) == 0
    return {"head": head, "scores": scores, "dir": d}


def _eval(capsys, *argv):
    rc = main(["-q", "eval", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def _rewrite(src: str, dst, edit) -> str:
    write_jsonl(str(dst), [edit(i, obj) for i, (_, obj) in enumerate(iter_jsonl(src))])
    return str(dst)


def test_eval_with_head_measures_on_the_heads_test_rows(llmbar, s42, capsys):
    from baer_fast import artifact
    from baer_fast.io.records import read_signals
    from baer_fast.io.splits import SplitSpec, roles

    rc, out, _ = _eval(capsys, "--signals", llmbar["signals"], "--scores", s42["scores"], "--head", s42["head"],
                       "--json", "--bootstrap", "10")
    assert rc == 0
    rep = json.loads(out)
    recs = read_signals(llmbar["signals"])
    score = {o["id"]: o["score"] for _, o in iter_jsonl(s42["scores"])}

    test = [x for r, x in zip(roles(recs, SplitSpec(seed="s42")), recs) if r == "test" and x.label in ("a", "b")]
    old = [x for r, x in zip(roles(recs, SplitSpec()), recs) if r == "test" and x.label in ("a", "b")]
    assert {x.id for x in old} != {x.id for x in test}     # the default seed's test rows hold fit rows
    err = [abs((x.label == "a") - 1 / (1 + math.exp(-score[x.id]))) for x in test]
    assert rep["calibration"]["head"]["n"] == len(test)
    assert rep["calibration"]["head"]["brier"] == pytest.approx(sum(e * e for e in err) / len(err), rel=1e-9)
    assert rep["split_spec"] == {"seed": "s42", "selection": 0.2, "calibration": 0.4, "from": "head"}
    assert len(recs) - len(test) - sum(x.label not in ("a", "b") for x in recs) == \
        artifact.load(s42["head"])["fitted_on"]["n_rows"]


def test_split_seed_that_disagrees_with_the_head_is_refused(llmbar, s42, capsys):
    base = ["--signals", llmbar["signals"], "--scores", s42["scores"], "--head", s42["head"], "--bootstrap", "10"]
    rc, _, err = _eval(capsys, *base, "--split-seed", "baer-v1")
    assert rc == 2 and "--split-seed" in err and "'s42'" in err and "training rows" in err
    assert err.count("\n") == 1
    assert _eval(capsys, *base, "--split-seed", "s42")[0] == 0


def test_eval_without_head_uses_the_split_the_score_run_recorded(llmbar, s42, capsys):
    # before, eval without --head measured on the default seed's test rows, which hold s42's training rows
    base = ["--signals", llmbar["signals"], "--scores", s42["scores"], "--bootstrap", "10"]
    rc, out, _ = _eval(capsys, *base, "--json")
    with_head = json.loads(_eval(capsys, *base, "--head", s42["head"], "--json")[1])
    assert rc == 0
    rep = json.loads(out)
    assert rep["split_spec"] == {"seed": "s42", "selection": 0.2, "calibration": 0.4, "from": "scores"}
    assert rep["calibration"]["head"] == with_head["calibration"]["head"]
    assert rep["n_pairs"] == with_head["n_pairs"]
    rc, _, err = _eval(capsys, *base, "--split-seed", "baer-v1")
    assert rc == 2 and "'s42'" in err and "progress record" in err and "training rows" in err
    rc, out, _ = _eval(capsys, *base, "--split-seed", "s42")
    assert rc == 0 and "split seed 's42' (from the head the score run recorded)" in out


def test_scores_of_another_head_are_refused(llmbar, s42, tmp_path, capsys):
    # condition 'g' (scores) vs 'GPT-4' (the fixture's head)
    rc, _, err = _eval(capsys, "--signals", llmbar["signals"], "--scores", s42["scores"], "--head", llmbar["head"])
    assert rc == 2 and "field 'condition'" in err and "'g'" in err and "'GPT-4'" in err
    # the same condition name and kind, another head: the score run's progress record tells
    from baer_fast import artifact
    kind = artifact.load(s42["head"])["head"]
    renamed = _rewrite(llmbar["scores"], tmp_path / "s.jsonl", lambda i, o: {**o, "condition": "g", "head": kind})
    with open(renamed + ".progress.json", "w") as fh:
        json.dump({"fingerprint": {"command": "score", "head": "sha256:" + "0" * 64}}, fh)
    rc, _, err = _eval(capsys, "--signals", llmbar["signals"], "--scores", renamed, "--head", s42["head"])
    assert rc == 2 and "field 'head'" in err and "written by head sha256:000" in err


def test_head_kind_mismatch_is_refused(llmbar, tmp_path, capsys):
    route = _rewrite(llmbar["scores"], tmp_path / "r.jsonl", lambda i, o: {**o, "head": "not-this-head"})
    rc, _, err = _eval(capsys, "--signals", llmbar["signals"], "--scores", route, "--head", llmbar["head"])
    assert rc == 2 and "r.jsonl:1: field 'head'" in err and "'not-this-head'" in err


def test_scores_file_mixing_two_conditions_is_refused(llmbar, tmp_path, capsys):
    mixed = _rewrite(llmbar["scores"], tmp_path / "m.jsonl",
                     lambda i, o: {**o, "condition": "GPT-4" if i < 5 else "PaLM2"})
    rc, _, err = _eval(capsys, "--signals", llmbar["signals"], "--scores", mixed)
    assert rc == 2 and "m.jsonl:6: field 'condition'" in err and "'PaLM2' differs from 'GPT-4' (line 1)" in err


def test_head_experts_absent_from_the_signals_is_refused(llmbar, tmp_path, capsys):
    from baer_fast import artifact
    gone = artifact.load(llmbar["head"])["experts"][0]
    sig = _rewrite(llmbar["signals"], tmp_path / "sig.jsonl",
                   lambda i, o: {**o, "experts": {k: v for k, v in o["experts"].items() if k != gone}})
    rc, _, err = _eval(capsys, "--signals", sig, "--scores", llmbar["scores"], "--head", llmbar["head"])
    assert rc == 2 and f"field 'experts.{gone}'" in err and "absent from every record" in err
    assert _eval(capsys, "--signals", sig, "--scores", llmbar["scores"], "--bootstrap", "10")[0] == 0   # no --head


@pytest.mark.parametrize("label", [None, "tie"])
def test_no_labelled_row_is_an_error(llmbar, tmp_path, capsys, label):
    def strip(i, o):
        o = {k: v for k, v in o.items() if k != "label"}
        return {**o, "label": label} if label else o
    sig = _rewrite(llmbar["signals"], tmp_path / "nolabel.jsonl", strip)
    rc, out, err = _eval(capsys, "--signals", sig, "--scores", llmbar["scores"], "--json")
    assert rc == 2 and out == "" and "field 'label'" in err and "no labelled pair in the test split" in err


def test_evaluate_without_labelled_rows_is_valid_json(llmbar):
    from baer_fast.eval.metrics import evaluate, format_table
    from baer_fast.io.records import read_signals

    recs = [dataclasses.replace(r, label=None) for r in read_signals(llmbar["signals"])]
    rep = evaluate(recs, [1.0] * len(recs), ["test"] * len(recs))
    assert rep["accuracy"] is None and all(m["accuracy_fair"] is None for m in rep["experts"].values())
    json.dumps(rep, allow_nan=False)
    assert "accuracy is undefined" in format_table(rep) and "nan" not in format_table(rep)


def test_unscored_pairs_name_the_remedy_or_are_counted_under_skip(llmbar, tmp_path, capsys, caplog):
    ids = [o["id"] for _, o in iter_jsonl(llmbar["signals"])]
    part = tmp_path / "part.jsonl"
    write_jsonl(str(part), [o for _, o in iter_jsonl(llmbar["scores"]) if o["id"] != ids[3]])
    (tmp_path / "part.jsonl.rejects.jsonl").write_text("{}\n")
    rc, _, err = _eval(capsys, "--signals", llmbar["signals"], "--scores", str(part))
    assert rc == 2 and "have no score" in err and "--on-error skip" in err and "part.jsonl.rejects.jsonl" in err
    rc, out, err = _eval(capsys, "--signals", llmbar["signals"], "--scores", str(part), "--split", "all",
                         "--on-error", "skip", "--json", "--bootstrap", "10")
    rep = json.loads(out)
    assert rc == 0 and rep["n_pairs"] == len(ids) - 1
    assert rep["left_out"] == {"bad_records": 0, "unscored": 1, "unscored_in_split": 1, "first_unscored": ids[3],
                               "first_error": None}
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert any("left out 1 unscored pairs" in m for m in warned)          # a warning: said even under -q


def test_skip_also_leaves_out_bad_signals_records(llmbar, tmp_path, capsys, caplog):
    sig = _rewrite(llmbar["signals"], tmp_path / "bad.jsonl", lambda i, o: {**o, "label": "zzz"} if i == 2 else o)
    rc, out, err = _eval(capsys, "--signals", sig, "--scores", llmbar["scores"], "--on-error", "skip",
                         "--bootstrap", "10")
    assert rc == 0 and "1 bad records (first: " in out
    assert any("bad.jsonl:3: field 'label'" in r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING)


def test_rewardbench_leaderboard_on_other_data_is_an_error(llmbar, capsys):
    rc, out, err = _eval(capsys, "--signals", llmbar["signals"], "--scores", llmbar["scores"],
                         "--leaderboard", "rewardbench", "--bootstrap", "10")
    assert rc == 2 and out == "" and "field '--leaderboard'" in err and "no RewardBench subset" in err


@pytest.mark.parametrize("argv, needle", [
    (["--bootstrap", "0"], "--bootstrap"), (["--bootstrap", "-5"], "--bootstrap"),
    (["--internal", "Nope"], "'Nope' is not an expert"), (["--baselines", ""], "names no expert"),
    (["--baselines", " , "], "names no expert"),
    (["--baselines", "CoT,Swap", "--internal", "Swap"], "field '--internal': ")])     # no effect on a given pool
def test_bad_option_values_are_errors(llmbar, capsys, argv, needle):
    rc, out, err = _eval(capsys, "--signals", llmbar["signals"], "--scores", llmbar["scores"], *argv)
    assert rc == 2 and out == "" and needle in err


def _fitted_eval(llmbar, tmp_path, capsys, *fit_args):
    """fit with fit_args, score, then eval --head --json: (head path, scores path, eval's report)."""
    head, scores = str(tmp_path / "h.json"), str(tmp_path / "h.sc.jsonl")
    assert main(["-q", "fit", "--signals", llmbar["signals"], "--condition", "g", *fit_args, "--out", head]) == 0
    assert main(["-q", "score", "--signals", llmbar["signals"], "--head", head, "--out", scores]) == 0
    capsys.readouterr()
    rc, out, _ = _eval(capsys, "--signals", llmbar["signals"], "--scores", scores, "--head", head, "--json",
                       "--bootstrap", "10")
    assert rc == 0
    return head, scores, json.loads(out)


def test_eval_leaves_the_heads_own_reference_expert_out_of_the_pool(llmbar, tmp_path, capsys):
    # fit's reference gate compares the reference head with the external protocols minus the expert named by
    # --reference-expert; eval with that --head must use the same pool, not call that expert a baseline
    head, scores, rep = _fitted_eval(llmbar, tmp_path, capsys, "--head", "reference", "--reference-expert", "Reference")
    assert "Reference" not in rep["baseline_pool"] and not rep["experts"]["Reference"]["baseline"]
    assert rep["strongest_baseline"]["expert"] != "Reference"
    gate = json.load(open(head))["selection"]["gates"]["reference"]
    assert gate["baseline"] in rep["baseline_pool"]
    rc, out, _ = _eval(capsys, "--signals", llmbar["signals"], "--scores", scores, "--head", head, "--json",
                       "--bootstrap", "10", "--baselines", "Reference,CoT")
    assert rc == 0 and json.loads(out)["baseline_pool"] == ["CoT", "Reference"]     # an explicit pool is kept


@pytest.mark.parametrize("fit_args, own", [(["--internal", "CoT", "--internal", "Swap"], ["CoT", "Swap"]),
                                           (["--pointwise-expert", "Vanilla"], ["Vanilla"])])
def test_eval_leaves_the_experts_fit_left_out_of_the_pool(llmbar, tmp_path, capsys, fit_args, own):
    # fit --internal keeps an expert out of the reference gate's pool, and so does naming it BAER's pointwise
    # expert; the artifact records that pool, and eval --head leaves the same experts out without being told
    head, _, rep = _fitted_eval(llmbar, tmp_path, capsys, "--reference-expert", "Reference", *fit_args)
    pool = json.load(open(head))["selection"]["gates"]["reference"]["pool"]
    assert not {"Reference", *own} & set(pool)
    assert rep["baseline_pool"] == pool and not any(rep["experts"][e]["baseline"] for e in own)
