"""The bad-input corpus (tests/data/bad/cases.json): every case exits 2 with one located line.

Each case runs the real CLI in-process. The error must be one line naming the file, the
line and the field the case names; the output folder must hold exactly what it held
before (nothing half-written, a previous complete output untouched).
"""
from __future__ import annotations

import json
import os
import shutil

import pytest

from baer_fast.cli import main
from tests.fixtures.data import BAD, snapshot

with open(os.path.join(BAD, "cases.json"), encoding="utf-8") as _fh:
    CASES = json.load(_fh)


def test_corpus_is_large_and_covers_every_kind():
    kinds = {c["name"].split("-")[0] for c in CASES}
    assert len(CASES) >= 40
    assert kinds == {"pairs", "signals", "scores", "artifacts", "cli"}


def _prepare(case: dict, tmp_path, llmbar: dict) -> dict:
    work, out_dir = tmp_path / "in", tmp_path / "out"
    work.mkdir()
    out_dir.mkdir()
    subs = {"tmp": str(work), "head": llmbar["head"], "signals": llmbar["signals"],
            "scores": llmbar["scores"], "out": str(out_dir / ("head.json" if "fit" in case["argv"] else "out.jsonl"))}
    if case["file"]:
        subs["file"] = str(work / os.path.basename(case["file"]))
        shutil.copyfile(os.path.join(BAD, case["file"]), subs["file"])
    setup = case.get("setup")
    if setup == "out_is_dir":
        os.mkdir(subs["out"])
    elif setup == "prev_out_unmanaged":
        with open(subs["out"], "w") as fh:
            fh.write('{"id": "x", "score": 1.0}\n')
    elif setup == "prev_out_foreign":
        with open(subs["out"], "w") as fh:
            fh.write('{"id": "x", "score": 1.0}\n')
        with open(subs["out"] + ".progress.json", "w") as fh:
            json.dump({"fingerprint": {"command": "score", "head": "sha256:0", "input_sha256": "0"},
                       "bytes": 26, "records": 1, "complete": True}, fh)
    return subs


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_bad_input(case, tmp_path, llmbar, capsys):
    subs = _prepare(case, tmp_path, llmbar)
    argv = [a.format(**subs) for a in case["argv"]]
    before = snapshot(str(tmp_path / "out"))
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == case["exit"], err
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, err
    msg = lines[0]
    assert case["expect"] in msg
    if case["file"]:
        name = os.path.basename(case["file"])
        assert f"{name}:{case['line']}:" in msg if case["line"] else f"{name}" in msg, msg
    if case["field"]:
        assert f"field '{case['field']}'" in msg, msg
    assert snapshot(str(tmp_path / "out")) == before, "the output folder changed"
