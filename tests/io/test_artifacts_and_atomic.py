"""Artifacts are checksummed JSON (never pickles); every file write is atomic."""
from __future__ import annotations

import json
import os
import pickle
import stat

import pytest

from baer_fast import artifact
from baer_fast.artifact import SCHEMA_VERSION
from baer_fast.errors import ArtifactError, InputError
from baer_fast.io.jsonl import atomic_open, write_jsonl


def test_save_load_roundtrip_is_byte_stable(llmbar, tmp_path):
    art = artifact.load(llmbar["head"])
    artifact.save(str(tmp_path / "again.json"), art)
    assert open(llmbar["head"], "rb").read() == (tmp_path / "again.json").read_bytes()
    mode = stat.S_IMODE(os.stat(tmp_path / "again.json").st_mode)
    assert mode & 0o044, "artifacts get the usual file mode, not mkstemp's 0600"


@pytest.mark.parametrize("edit,match", [
    (lambda d: d.update(schema_version=SCHEMA_VERSION + 1), f"field 'schema_version': {SCHEMA_VERSION + 1} is newer"),
    (lambda d: d.update(format="something-else"), "field 'format'"),
    (lambda d: d["heads"].clear(), "field 'head'"),
])
def test_refused_after_a_consistent_edit(llmbar, tmp_path, edit, match):
    d = json.load(open(llmbar["head"]))
    edit(d)
    d["checksum"] = artifact.checksum(d)
    p = tmp_path / "h.json"
    p.write_text(json.dumps(d))
    with pytest.raises(ArtifactError, match=match):
        artifact.load(str(p))


def test_any_single_edit_breaks_the_checksum(llmbar, tmp_path):
    text = open(llmbar["head"]).read()
    p = tmp_path / "h.json"
    p.write_text(text.replace('"condition": "GPT-4"', '"condition": "GPT-5"'))
    with pytest.raises(ArtifactError, match="field 'checksum'"):
        artifact.load(str(p))


def test_pickles_are_never_loaded(tmp_path, monkeypatch):
    monkeypatch.setattr(pickle, "loads", lambda *a, **k: pytest.fail("unpickled"))
    for proto in range(0, 6):
        p = tmp_path / f"h{proto}.pkl"
        p.write_bytes(pickle.dumps({"format": "baer-fast-head"}, protocol=proto))
        with pytest.raises(ArtifactError):
            artifact.load(str(p))


def test_truncated_artifact_names_the_line(llmbar, tmp_path):
    text = open(llmbar["head"]).read()
    p = tmp_path / "h.json"
    p.write_text(text[: len(text) // 2])
    with pytest.raises(ArtifactError, match=r"h.json:\d+: not a valid JSON artifact"):
        artifact.load(str(p))


def test_atomic_write_leaves_old_file_or_nothing(tmp_path):
    target = tmp_path / "x.jsonl"
    write_jsonl(str(target), [{"id": "old"}])

    def records():
        yield {"id": "new"}
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError):
        write_jsonl(str(target), records())
    assert target.read_text() == '{"id":"old"}\n'
    assert os.listdir(tmp_path) == ["x.jsonl"]
    with pytest.raises(InputError, match="is a directory"):
        with atomic_open(str(tmp_path)):
            pass


def test_import_writes_every_file_atomically(tmp_path, monkeypatch):
    """A crash between two files of one import leaves complete files only, never a torn one."""
    from baer_fast.cli import main
    from baer_fast.commands.demo import sample_dir
    from baer_fast.io import records

    real, calls = records.write_jsonl, []

    def flaky(path, recs):
        calls.append(path)
        if len(calls) == 3:
            return real(path, (r if i < 5 else (_ for _ in ()).throw(OSError("disk full"))
                               for i, r in enumerate(recs)))
        return real(path, recs)

    monkeypatch.setattr(records, "write_jsonl", flaky)
    out = tmp_path / "imp"
    with pytest.raises(OSError):
        main(["--quiet", "import", "llmbar", sample_dir(), "--out", str(out)])
    files = sorted(os.listdir(out))
    assert files == ["pairs.jsonl", "signals.ChatGPT.jsonl"]          # no temp file, no torn third file
    for f in files:
        lines = (out / f).read_text().splitlines()
        assert len(lines) == 100 and all(json.loads(x)["id"] for x in lines)
