"""Transfer to a condition without labels: leak-free, antisymmetric, and only heads that can score it."""
from __future__ import annotations

import numpy as np
import pytest

from baer_fast import artifact
from baer_fast.cli import main
from baer_fast.errors import InputError
from baer_fast.io.records import Signals, write_signals
from baer_fast.selection.transfer import agreement_weights, fit_transfer

from tests.selection.cost_synth import bank
from tests.selection.test_cascade import _stack_art


@pytest.fixture(scope="module")
def sources():
    return [(f"src{k}", _stack_art(bank(120, seed=10 + k))) for k in range(3)]


def test_target_labels_are_never_read(sources, tmp_path):
    target = bank(80, seed=99)
    blank = [Signals(r.id, r.experts, r.subset, None, r.split, r.meta) for r in target]
    flipped = [Signals(r.id, r.experts, r.subset, {"a": "b", "b": "a"}[r.label], r.split, r.meta) for r in target]
    paths = []
    for k, recs in enumerate((target, blank, flipped)):
        artifact.save(str(tmp_path / f"t{k}.json"), fit_transfer(recs, sources, condition="t"))
        paths.append((tmp_path / f"t{k}.json").read_bytes())
    assert paths[0] == paths[1] == paths[2]


def test_pooled_head_is_antisymmetric_and_beats_chance(sources):
    target = bank(200, seed=7)
    head = artifact.deployed_head(fit_transfer(target, sources, condition="t"))
    s = head.score(target)
    s_sw = head.score([r.swapped() for r in target])
    assert np.allclose(s_sw, -s, rtol=0, atol=64 * np.finfo(float).eps * max(1.0, np.abs(s).max()))
    y = np.array([1 if r.label == "a" else -1 for r in target])
    assert np.mean(np.sign(s) == y) > 0.75


def test_agreement_weights_downweight_a_dissenter():
    z = np.array([[1.0, 1, -1, 1], [1.0, 1, -1, 1], [1.0, 2, -1, 1], [-1.0, -1, 1, -1]])
    w = agreement_weights(z)
    assert w[0] == w[1] == w[2] == 1 and w[3] == 0


def test_heads_missing_an_expert_are_skipped(sources):
    target = [Signals(r.id, {k: v for k, v in r.experts.items() if k != "huge"}, meta=r.meta)
              for r in bank(40, seed=3)]
    with pytest.raises(InputError, match="none of the 3 heads") as e:
        fit_transfer(target, sources, condition="t")
    assert "src0 needs huge, which these signals lack" in str(e.value)
    assert "fit --experts " + ",".join(sorted(target[0].experts)) in str(e.value)     # how to make them usable


def test_fit_experts_option_makes_sources_usable_for_a_smaller_target(tmp_path):
    """The CLI path the error points to: sources fitted with --experts on the target's experts pool."""
    target = [Signals(r.id, {k: v for k, v in r.experts.items() if k != "huge"}, meta=r.meta)
              for r in bank(60, seed=3)]
    keep = ",".join(sorted(target[0].experts))
    for k in range(2):
        sig = tmp_path / f"s{k}.jsonl"
        write_signals(str(sig), bank(120, seed=10 + k))
        assert main(["fit", "-q", "--signals", str(sig), "--condition", f"s{k}", "--out", str(tmp_path / f"h{k}.json"),
                     "--experts", keep]) == 0
        art = artifact.load(str(tmp_path / f"h{k}.json"))
        assert art["experts"] == sorted(target[0].experts)
        assert art["fit_report"]["experts_option"] == {"kept": sorted(target[0].experts), "dropped": ["huge"]}
    sig = tmp_path / "t.jsonl"
    write_signals(str(sig), target)
    assert main(["fit", "--signals", str(sig), "--condition", "t", "--out", str(tmp_path / "t.json"),
                 "--transfer-from", str(tmp_path / "h0.json"), str(tmp_path / "h1.json")]) == 0
    assert len(artifact.load(str(tmp_path / "t.json"))["heads"]["pooled"]["members"]) == 2


def test_fit_experts_option_refuses_an_unknown_expert(tmp_path, capsys):
    sig = tmp_path / "s.jsonl"
    write_signals(str(sig), bank(40, seed=1))
    assert main(["fit", "--signals", str(sig), "--condition", "s", "--out", str(tmp_path / "h.json"),
                 "--experts", "cheap,nope"]) == 2
    err = capsys.readouterr().err
    assert "field '--experts'" in err and "not in these signals: nope" in err and str(sig) in err
    assert not (tmp_path / "h.json").exists()


def _heads_folder(sources, tmp_path):
    heads = tmp_path / "heads"
    heads.mkdir()
    for name, art in sources:
        artifact.save(str(heads / f"{name}.json"), art)
    return heads, tmp_path / "t.jsonl"


def test_fit_cli_transfer_from_a_folder(sources, tmp_path):
    heads, sig = _heads_folder(sources, tmp_path)
    write_signals(str(sig), [Signals(r.id, r.experts, meta=r.meta) for r in bank(50, seed=4)])
    out = tmp_path / "t.json"
    assert main(["fit", "--signals", str(sig), "--condition", "t", "--out", str(out),
                 "--transfer-from", str(heads)]) == 0
    art = artifact.load(str(out))
    assert art["head"] == "pooled" and len(art["heads"]["pooled"]["members"]) == 3


def test_skipped_heads_are_named_with_the_reason(sources, caplog):
    """docs/cost.md: heads that cannot score the target are skipped and listed, not only in fit_report."""
    import logging
    def without_huge(records):
        return [Signals(r.id, {k: v for k, v in r.experts.items() if k != "huge"}, label=r.label, meta=r.meta)
                for r in records]
    lacking = without_huge(bank(40, seed=3))
    small = ("small", _stack_art(without_huge(bank(120, seed=20))))
    with caplog.at_level(logging.WARNING, logger="baer_fast"):
        art = fit_transfer(lacking, [small, *sources], condition="t")
    assert [m["source"] for m in art["heads"]["pooled"]["members"]] == ["small"]
    assert "3 of 4 heads skipped" in caplog.text and "src1 needs huge, which these signals lack" in caplog.text


def test_a_rerun_into_the_sources_folder_gives_the_same_bytes(sources, tmp_path):
    """fit --transfer-from heads/ --out heads/t.json, twice: the first run's t.json is no source of the second."""
    heads, sig = _heads_folder(sources, tmp_path)
    write_signals(str(sig), bank(50, seed=4))
    out = heads / "t.json"
    argv = ["fit", "-q", "--signals", str(sig), "--condition", "t", "--out", str(out), "--transfer-from", str(heads)]
    assert main(argv) == 0
    first = out.read_bytes()
    assert main(argv) == 0
    assert out.read_bytes() == first
    assert artifact.load(str(out))["fit_report"]["transfer"]["skipped"] == []


def test_transfer_option_errors_name_what_is_wrong(sources, tmp_path, capsys):
    """--head stack was silently ignored (a pooled head deployed); an empty folder was not named."""
    artifact.save(str(tmp_path / "src0.json"), sources[0][1])
    sig, out, empty = tmp_path / "t.jsonl", tmp_path / "out" / "t.json", tmp_path / "empty"
    empty.mkdir()
    write_signals(str(sig), bank(40, seed=4))
    base = ["fit", "--signals", str(sig), "--condition", "t", "--out", str(out)]
    assert main(base + ["--transfer-from", str(tmp_path / "src0.json"), "--head", "stack"]) == 2
    assert "--head stack would be ignored" in capsys.readouterr().err
    assert main(base + ["--transfer-from", str(empty)]) == 2
    assert f"no *.json in {empty}" in capsys.readouterr().err
    assert not out.exists()


def test_a_source_whose_deployed_head_is_constant_is_a_member(sources):
    """The rule can deploy the constant head (one expert); such a source was skipped as 'a constant head'."""
    from baer_fast.selection.fit import fit_condition
    src = bank(120, seed=30)
    const = fit_condition(src, condition="k", head="constant")
    assert const["head"] == "constant"
    target = bank(60, seed=31)
    art = fit_transfer(target, [("k", const), *sources], condition="t")
    assert [m["source"] for m in art["heads"]["pooled"]["members"]] == ["k", "src0", "src1", "src2"]
    saved = artifact.deployed_head({**art, "tiebreak": None})
    s = np.asarray(saved.score(target))
    assert np.allclose(np.asarray(saved.score([r.swapped() for r in target])), -s, rtol=0, atol=1e-9)
    member = saved.members[0]
    untied = artifact.deployed_head({**const, "tiebreak": None})
    assert np.array_equal(np.asarray(member[0].score(target)), np.asarray(untied.score(target)))
