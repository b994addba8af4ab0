"""Bad input: one clear line naming file:line and field, exit 2, no partial output."""
import argparse
import json

import pytest

from baer_fast.io.adapters import load
from baer_fast.io.records import write_signals

from tests.fixtures.data import make_signals

GOOD = {"id": "x1", "subset": "s", "label": "a", "meta": {}, "experts": {"e1": [0.9, 0.8]}}


def _line(**over):
    d = json.loads(json.dumps(GOOD))
    d.update(over)
    return json.dumps(d)


CASES = {
    "malformed_json": ('{"id": "x1", "experts": {', 1, "malformed JSON"),
    "missing_field": (json.dumps({"id": "x1", "subset": "s"}), 1, "field 'experts'"),
    "wrong_type": (_line(experts=[0.5]), 1, "field 'experts': expected dict"),
    "u_outside": (_line(experts={"e1": [1.5, 0.2]}), 1, "field 'experts.e1'"),
    "u_string": (_line(experts={"e1": ["0.5"]}), 1, "field 'experts.e1'"),
    "duplicate_id": (_line() + "\n" + _line(), 2, "duplicate id"),
    "bad_label": (_line(label="A"), 1, "field 'label'"),
    "empty_file": ("", None, "empty file"),
    "nan": (_line().replace("0.9", "NaN"), 1, "malformed JSON"),
    "lone_surrogate": (_line(meta={"note": "cut \ud83d"}), 1, "field 'meta.note': unpaired surrogate \\ud83d"),
    "meta_stat_text": (_line(meta={"len_q": "abc"}), 1, "field 'meta.len_q': expected a non-negative number"),
    "meta_stat_list": (_line(meta={"len_a": [3]}), 1, "field 'meta.len_a': expected a non-negative number"),
    "meta_condition": (_line(meta={"condition": 5}), 1, "field 'meta.condition': expected a string"),
    "meta_cost_shape": (_line(meta={"expert_cost": 5}), 1, "field 'meta.expert_cost': expected an object"),
    "meta_cost_value": (_line(meta={"expert_cost": {"e1": {"prefilled": "x"}}}), 1,
                        "field 'meta.expert_cost.e1.prefilled'"),
    "meta_shared_shape": (_line(meta={"prefill_shared": [[120, "e1"]]}), 1,
                          "field 'meta.prefill_shared': expected a list of [tokens, [expert, ...]]"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_signals_fail_fit_and_score_cleanly(cli, tmp_path, case):
    text, line, needle = CASES[case]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(_line(id="ok0") + "\n" + text + "\n" if line else text)
    shift = 1 if line else 0
    out = tmp_path / "head.json"
    code, _, err = cli("fit", "--signals", bad, "--condition", "c", "--out", out)
    assert code == 2
    msg = err.strip().splitlines()
    assert len(msg) == 1, err
    where = f"{bad}:{line + shift}:" if line else f"{bad}:"
    assert where in msg[0] and needle in msg[0], msg[0]
    assert not out.exists() and not list(tmp_path.glob(".*.tmp"))


def _good_head(cli, tmp_path):
    sig = tmp_path / "good.jsonl"
    write_signals(str(sig), make_signals(120, seed=4))
    head = tmp_path / "head.json"
    assert cli("fit", "--signals", sig, "--condition", "c", "--out", head)[0] == 0
    return sig, head


def test_unknown_expert_in_artifact_is_a_clear_error(cli, tmp_path):
    sig, head = _good_head(cli, tmp_path)
    other = tmp_path / "other.jsonl"
    write_signals(str(other), make_signals(20, experts=("x1", "x2"), seed=5))
    out = tmp_path / "scores.jsonl"
    code, _, err = cli("score", "--signals", other, "--head", head, "--out", out)
    assert code == 2 and "expert 'e1' of the " in err and "head is absent from every record" in err
    assert str(other) in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_score_without_a_head_uses_the_default_head_and_says_what_to_pass(cli, tmp_path):
    """`score --input/--signals` without --head scores with the label-free default head, as serve and Judge
    do (it was a usage error); signals that lack its experts are an error that names --head."""
    import json

    from baer_fast.heads.default import DefaultHead
    sig = tmp_path / "s.jsonl"
    records = make_signals(12, experts=("direct", "score"), seed=3)
    write_signals(str(sig), records)
    out = tmp_path / "scores.jsonl"
    code, _, err = cli("score", "--signals", sig, "--out", out)
    assert code == 0, err
    got = [json.loads(x) for x in out.read_text().splitlines() if x.startswith('{"id"')]
    assert [g["score"] for g in got] == [float(x) for x in DefaultHead().score(records)]
    assert {g["head"] for g in got} == {"default"}
    other = tmp_path / "other.jsonl"
    write_signals(str(other), make_signals(5, experts=("x1", "x2"), seed=5))
    code, _, err = cli("score", "--signals", other, "--out", tmp_path / "o.jsonl")
    assert code == 2 and "pass --head with a head fitted on these signals" in err


def test_tampered_artifact_is_refused(cli, tmp_path):
    sig, head = _good_head(cli, tmp_path)
    d = json.loads(head.read_text())
    d["heads"]["stack"]["weights"][0] += 1.0
    head.write_text(json.dumps(d))
    code, _, err = cli("score", "--signals", sig, "--head", head, "--out", tmp_path / "s.jsonl")
    assert code == 2 and "checksum" in err and "mismatch" in err


def test_pickled_artifact_is_never_unpickled(cli, tmp_path):
    import pickle
    sig, _ = _good_head(cli, tmp_path)
    evil = tmp_path / "evil.json"
    evil.write_bytes(pickle.dumps({"format": "baer-fast-head"}))
    code, _, err = cli("score", "--signals", sig, "--head", evil, "--out", tmp_path / "s.jsonl")
    assert code == 2 and "never unpickled" in err


def test_bad_pairs_name_the_field(tmp_path):
    from baer_fast.errors import InputError
    from baer_fast.io.records import read_pairs
    p = tmp_path / "pairs.jsonl"
    p.write_text(json.dumps({"id": "a", "question": "q", "response_a": "x"}) + "\n")
    with pytest.raises(InputError, match=r"pairs.jsonl:1: field 'response_b': missing"):
        read_pairs(str(p))


def test_lone_surrogates_are_located_and_pairs_keep_whole_emoji(tmp_path):
    """JSON may escape half a UTF-16 pair ("\\ud83d" alone), which is not text: a located error
    (or a reject with --on-error skip), where a whole pair ("\\ud83d\\ude00") is one emoji."""
    from baer_fast.errors import InputError
    from baer_fast.io.records import read_pairs
    from baer_fast.io.rejects import Rejects
    p = tmp_path / "pairs.jsonl"
    rows = [{"id": "a", "question": "smile \ud83d\ude00", "response_a": "x", "response_b": "y"},
            {"id": "b", "question": "q", "response_a": "x", "response_b": "cut \udc00"}]
    p.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="ascii")
    with pytest.raises(InputError, match=r"pairs.jsonl:2: field 'response_b': unpaired surrogate \\udc00 at character 4"):
        read_pairs(str(p))
    rej = Rejects()
    (pair,) = read_pairs(str(p), rejects=rej)
    assert pair.question == "smile \U0001F600" and [r["line"] for r in rej.items] == [2]
    (tmp_path / "t.json").write_text(json.dumps(rows), encoding="ascii")       # an importer's .json list
    with pytest.raises(InputError, match=r"t.json:2: field 'response_b': unpaired surrogate"):
        load("table", str(tmp_path / "t.json"), options=argparse.Namespace(
            question_col="question", chosen_col="response_a", rejected_col="response_b", a_col=None, b_col=None,
            label_col=None, subset_col=None, category_col=None, id_col="id"))


def test_derived_parameters_that_are_not_an_object_are_named(cli, tmp_path):
    """A signals file's .derived.json (or --derived-params) holding a list, not {expert: params}."""
    sig = tmp_path / "s.jsonl"
    write_signals(str(sig), make_signals(40, seed=3))
    side = tmp_path / "s.jsonl.derived.json"
    side.write_text("[1, 2]")
    code, _, err = cli("fit", "--signals", sig, "--condition", "c", "--out", tmp_path / "h.json")
    assert code == 2 and f"{side}: expected a JSON object {{expert: parameters}}, got list" in err


def test_an_output_folder_that_cannot_be_one_is_named(cli, tmp_path):
    """import / demo --out naming a file, or a folder that cannot be created: exit 2 with the path
    and the flag, not a FileExistsError traceback."""
    src = tmp_path / "t.csv"
    src.write_text("q,good,bad\nhi,yes,no\n", encoding="utf-8")
    table = ["--question-col", "q", "--chosen-col", "good", "--rejected-col", "bad"]
    afile = tmp_path / "afile"
    afile.write_text("keep me")
    code, _, err = cli("import", "table", src, "--out", afile, *table)
    assert code == 2 and f"{afile}: field '--out': exists and is not a folder" in err
    assert afile.read_text() == "keep me"
    code, _, err = cli("import", "table", src, "--out", afile / "below", *table)
    assert code == 2 and "field '--out': cannot create this folder" in err
    code, _, err = cli("demo", "--out", afile)
    assert code == 2 and "exists and is not a folder" in err


def test_fit_and_frontier_check_their_output_before_the_work(cli, tmp_path):
    """An output that cannot be written is named before the signals are even read (the missing
    signals file would otherwise be the error), so a long fit or search never ends on it."""
    afile = tmp_path / "afile"
    afile.write_text("")
    missing = tmp_path / "no-such-signals.jsonl"
    code, _, err = cli("fit", "--signals", missing, "--condition", "c", "--out", afile / "h.json")
    assert code == 2 and f"{afile}: field '--out': exists and is not a folder" in err
    code, _, err = cli("frontier", "--signals", missing, "--plot", tmp_path)
    assert code == 2 and "field '--plot': is a directory" in err


def test_an_output_that_is_also_an_input_is_refused_before_it_is_touched(cli, tmp_path):
    """fit --out S --signals S replaced the signals with the head; score --overwrite --out S deleted them."""
    sig, head = _good_head(cli, tmp_path)
    before = sig.read_bytes()
    code, _, err = cli("fit", "--signals", sig, "--condition", "c", "--out", sig)
    assert code == 2 and "is also --signals" in err and "field '--out'" in err
    code, _, err = cli("score", "--signals", sig, "--head", head, "--out", sig, "--overwrite")
    assert code == 2 and "is also --signals" in err
    code, _, err = cli("score", "--signals", sig, "--head", head, "--out", head)
    assert code == 2 and "is also --head" in err
    head_before = head.read_bytes()
    code, _, err = cli("fit", "--signals", sig, "--condition", "t", "--out", head, "--transfer-from", head)
    assert code == 2 and "is also --transfer-from" in err           # it replaced the source with the pooled head
    assert head.read_bytes() == head_before
    assert sig.read_bytes() == before and json.loads(head.read_text())["head"]


def test_score_model_with_a_head_of_an_imported_bank_names_the_expert_it_cannot_run(cli, tmp_path):
    """A head fitted on imported signals (LLMBar's 'e1'-style protocol names) cannot be run by a local judge:
    one line naming the expert, before any model is looked at (it was a ValueError traceback)."""
    sig, head = _good_head(cli, tmp_path)
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"id": "p1", "question": "q", "response_a": "a", "response_b": "b"}) + "\n")
    code, _, err = cli("score", "--model", tmp_path / "no-model", "--head", head, "--input", pairs,
                       "--out", tmp_path / "s.jsonl")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "field 'experts': the head uses expert 'e1'" in err and "cannot run" in err


@pytest.mark.parametrize("extra, flag", [
    (["--condition", " "], "--condition"),
    (["--condition", "c", "--cascade-budget", "0.5"], "--cascade-budget"),
    (["--condition", "c", "--cascade-tolerance", "0.02"], "--cascade-tolerance"),
    (["--condition", "c", "--costs", "costs.json"], "--costs"),
    (["--condition", "c", "--transfer-from", "h.json", "--budget", "0.3"], "--transfer-from"),
])
def test_fit_options_that_would_be_ignored_are_errors(cli, tmp_path, extra, flag):
    """They used to be dropped without a word (or, for an empty --condition, stored as '')."""
    sig = tmp_path / "s.jsonl"
    write_signals(str(sig), make_signals(60, seed=4))
    out = tmp_path / "head.json"
    code, _, err = cli("fit", "--signals", sig, "--out", out, *extra)
    assert code == 2 and f"field '{flag}'" in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()


def test_fit_internal_must_name_an_expert_of_the_signals(cli, tmp_path):
    """A typo in --internal left the protocol in the reference gate's baseline pool without a word."""
    sig = tmp_path / "s.jsonl"
    write_signals(str(sig), make_signals(60, seed=4))
    code, _, err = cli("fit", "--signals", sig, "--condition", "c", "--out", tmp_path / "h.json", "--internal", "Nope")
    assert code == 2 and "field '--internal': 'Nope' is not an expert of the signals" in err


@pytest.mark.parametrize("option", [["--derived-params", "d.json"], ["--keep-texts"]])
def test_experts_refuses_an_option_its_experts_leave_without_effect(cli, tmp_path, option):
    """--derived-params without pride/calibraeval, --keep-texts without a generative expert: the run
    would ignore them (no parameters read, no texts file), so it stops first, before any model work."""
    (tmp_path / "d.json").write_text("{}")
    pairs = tmp_path / "p.jsonl"
    pairs.write_text('{"id": "x", "question": "q", "response_a": "a", "response_b": "b"}\n')
    out = tmp_path / "s.jsonl"
    option = [str(tmp_path / o) if o.endswith(".json") else o for o in option]
    code, _, err = cli("experts", "--model", tmp_path / "no-model", "--input", pairs, "--out", out,
                       "--experts", "direct,score", *option)
    assert code == 2 and f"field '{option[0]}': " in err, err
    assert not out.exists()
