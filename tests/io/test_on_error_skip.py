"""`--on-error skip`: bad records are skipped, counted and written to <out>.rejects.jsonl."""
from __future__ import annotations

import json
import os

import pytest

from baer_fast.cli import main
from baer_fast.errors import InputError
from baer_fast.io.records import read_pairs, read_signals, read_signals_many
from baer_fast.io.rejects import Rejects, rejects_path


def _with_bad_lines(src: str, dst: str) -> list[bytes]:
    with open(src, "rb") as fh:
        lines = fh.readlines()
    bad = [b'{"id": "bad-1", "experts": {"CoT": [1.5, 0.0]}}\n', b"not json\n", lines[0]]  # last: duplicate id
    lines = lines[:10] + bad[:2] + lines[10:50] + bad[2:] + lines[50:]
    with open(dst, "wb") as fh:
        fh.writelines(lines)
    return lines


def test_score_skip_writes_scores_for_good_rows_and_rejects_for_bad(llmbar, tmp_path, capsys):
    sig, out = str(tmp_path / "mixed.jsonl"), str(tmp_path / "scores.jsonl")
    _with_bad_lines(llmbar["signals"], sig)
    assert main(["score", "--signals", sig, "--head", llmbar["head"], "--out", out]) == 2
    assert not os.path.exists(out)
    assert "mixed.jsonl:11: field 'experts.CoT'" in capsys.readouterr().err
    rc = main(["score", "--signals", sig, "--head", llmbar["head"], "--out", out, "--on-error", "skip"])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    assert "3 bad records skipped" in cap.out
    with open(out, encoding="utf-8") as fh:
        ids = [json.loads(line)["id"] for line in fh]
    assert len(ids) == len(set(ids)) == 100
    with open(rejects_path(out), encoding="utf-8") as fh:
        rej = [json.loads(line) for line in fh]
    assert [(r["line"], r["field"]) for r in rej] == [(11, "experts.CoT"), (12, None), (53, "id")]
    assert all(r["file"] == sig and r["error"].startswith(f"{sig}:{r['line']}:") for r in rej)
    assert rej[1]["raw"] == "not json"


def test_pairs_reader_skip_keeps_raw_even_when_not_utf8(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_bytes(b'{"id": "a", "question": "q", "response_a": "x", "response_b": "y"}\n'
                     b'{"id": "b", "question": "caf\xe9"}\n'
                     b'{"id": "", "question": "q", "response_a": "x", "response_b": "y"}\n')
    rej = Rejects(str(tmp_path / "r.jsonl"))
    pairs = read_pairs(str(path), rejects=rej)
    assert [p.id for p in pairs] == ["a"] and pairs[0].line == 1
    assert [r["line"] for r in rej.items] == [2, 3]
    assert "\\xe9" in rej.items[0]["raw"]
    rej.save()
    assert len(open(rej.path).readlines()) == 2


def test_skip_everything_is_still_an_error(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"{}\n[]\n")
    rej = Rejects()
    with pytest.raises(InputError, match="no valid JSON records .2 line.s. rejected"):
        read_signals(str(path), rejects=rej)


def test_duplicates_across_files_are_rejected_in_skip_mode(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    rec = b'{"id": "x", "experts": {"d": [1.0, 0.0]}}\n'
    a.write_bytes(rec)
    b.write_bytes(rec + rec.replace(b'"x"', b'"y"'))
    with pytest.raises(InputError, match="b.jsonl:1: field 'id': duplicate id 'x' .first at .*a.jsonl:1"):
        read_signals_many([str(a), str(b)])
    rej = Rejects()
    assert [r.id for r in read_signals_many([str(a), str(b)], rejects=rej)] == ["x", "y"]
    assert len(rej) == 1


def test_fit_and_frontier_name_their_rejects_files(llmbar, tmp_path, monkeypatch, capsys):
    """The rejects files docs/commands.md names: fit `<out>.rejects.jsonl`; frontier `<plot>.rejects.jsonl`,
    or `frontier.rejects.jsonl` (in the working folder) without --plot."""
    sig = str(tmp_path / "mixed.jsonl")
    _with_bad_lines(llmbar["signals"], sig)
    monkeypatch.chdir(tmp_path)
    runs = {"h.json.rejects.jsonl": ["fit", "--signals", sig, "--condition", "c", "--out", "h.json"],
            "f.png.rejects.jsonl": ["frontier", "--signals", sig, "--plot", "f.png"],
            "frontier.rejects.jsonl": ["frontier", "--signals", sig]}
    for name, argv in runs.items():
        assert main(["-q", *argv, "--on-error", "skip"]) == 0, capsys.readouterr().err
        with open(tmp_path / name, encoding="utf-8") as fh:
            assert [json.loads(line)["line"] for line in fh] == [11, 12, 53], name
    assert sorted(p.name for p in tmp_path.glob("*.rejects.jsonl")) == sorted(runs)
