"""ResumableWriter: torn batches are dropped, foreign or damaged outputs are refused, ids never repeat."""
from __future__ import annotations

import json
import os

import pytest

from baer_fast.errors import InputError
from baer_fast.io.resumable import ResumableWriter, progress_path

FP = {"command": "t", "input_sha256": "abc"}


def _recs(lo, hi):
    return [{"id": f"r{i}", "v": i} for i in range(lo, hi)]


def _lines(path):
    with open(path, encoding="utf-8") as fh:
        return [json.loads(x) for x in fh]


def test_resume_drops_a_torn_batch_and_skips_done_ids(tmp_path):
    out = str(tmp_path / "o.jsonl")
    with ResumableWriter(out, fingerprint=FP) as w:
        w.append(_recs(0, 3))
        w.append(_recs(3, 5))
    with open(out, "ab") as fh:                       # a batch written, progress never recorded
        fh.write(b'{"id": "r5", "v": 5}\n{"id": "r6", "v"')
    with ResumableWriter(out, fingerprint=FP) as w:
        assert w.resumed and w.done_ids == {f"r{i}" for i in range(5)} and not w.complete
        w.append(_recs(5, 8))
        w.finish()
    assert _lines(out) == _recs(0, 8)
    with open(progress_path(out)) as fh:
        assert json.load(fh)["complete"]


def test_a_different_fingerprint_is_refused_and_nothing_changes(tmp_path):
    out = str(tmp_path / "o.jsonl")
    with ResumableWriter(out, fingerprint=FP) as w:
        w.append(_recs(0, 2))
        w.finish()
    before = open(out, "rb").read(), open(progress_path(out), "rb").read()
    with pytest.raises(InputError, match="differs in: input_sha256"):
        ResumableWriter(out, fingerprint=dict(FP, input_sha256="zzz"))
    assert (open(out, "rb").read(), open(progress_path(out), "rb").read()) == before
    with ResumableWriter(out, fingerprint=dict(FP, input_sha256="zzz"), overwrite=True) as w:
        assert not w.resumed and not w.done_ids


def test_append_refuses_an_id_already_written(tmp_path):
    with ResumableWriter(str(tmp_path / "o.jsonl"), fingerprint=FP) as w:
        w.append(_recs(0, 2))
        with pytest.raises(ValueError):
            w.append(_recs(1, 3))
        with pytest.raises(ValueError):
            w.append([{"id": "x"}, {"id": "x"}])


@pytest.mark.parametrize("damage,match", [
    ("cut", "shorter"), ("progress_garbage", "unreadable"), ("no_progress", "no progress record"),
    ("duplicate", "duplicate id"), ("replaced", "does not match its progress record"),
])
def test_damaged_outputs_are_refused(tmp_path, damage, match):
    out = str(tmp_path / "o.jsonl")
    with ResumableWriter(out, fingerprint=FP) as w:
        w.append(_recs(0, 3))
    if damage == "cut":
        os.truncate(out, 10)
    elif damage == "progress_garbage":
        open(progress_path(out), "w").write("{not json")
    elif damage == "no_progress":
        os.unlink(progress_path(out))
    elif damage == "duplicate":
        data = open(out, "rb").read().splitlines(keepends=True)
        open(out, "wb").write(data[0] + data[0] + data[2])
    elif damage == "replaced":       # another run's longer file under the same name: resuming would cut it
        open(out, "w").write("".join(json.dumps({"id": f"q{i}", "long": "x" * (7 * i)}) + "\n" for i in range(9)))
    before = open(out, "rb").read()
    with pytest.raises(InputError, match=match):
        ResumableWriter(out, fingerprint=FP)
    assert open(out, "rb").read() == before                  # refused, and not cut


def test_a_second_writer_on_the_same_output_is_refused(tmp_path):
    out = str(tmp_path / "o.jsonl")
    with ResumableWriter(out, fingerprint=FP):
        with pytest.raises(InputError, match="another baer-fast run"):
            ResumableWriter(out, fingerprint=FP)


def test_progress_is_written_before_the_data_file(tmp_path):
    out = str(tmp_path / "o.jsonl")
    with ResumableWriter(out, fingerprint=FP):
        pass
    with ResumableWriter(out, fingerprint=FP) as w:      # an empty started run resumes cleanly
        assert w.resumed and not w.done_ids


def test_out_is_a_directory(tmp_path):
    with pytest.raises(InputError, match="is a directory"):
        ResumableWriter(str(tmp_path), fingerprint=FP)


def test_reorder_puts_records_in_the_given_order_and_stays_resumable(tmp_path):
    """The same lines in another order, atomically: the progress record still fits, a rerun
    resumes with every id done, appends go to the new file, and the lock moves with it."""
    out = str(tmp_path / "o.jsonl")
    with ResumableWriter(out, fingerprint=FP) as w:
        w.append(_recs(2, 4))
        w.append(_recs(0, 2))
        w.reorder(["r3", "r0", "r9", "r1"])                      # r2 not named: after the named ones
        assert [r["id"] for r in _lines(out)] == ["r3", "r0", "r1", "r2"]
        with pytest.raises(InputError, match="another baer-fast run"):
            ResumableWriter(out, fingerprint=FP)
        w.append(_recs(4, 5))
    assert [r["id"] for r in _lines(out)] == ["r3", "r0", "r1", "r2", "r4"]
    with ResumableWriter(out, fingerprint=FP) as w:
        assert w.resumed and w.done_ids == {f"r{i}" for i in range(5)}
        w.finish()
    assert sorted(_lines(out), key=lambda r: r["v"]) == _recs(0, 5)


def test_a_resume_with_other_engine_settings_is_warned_about(tmp_path, caplog):
    """chunk size, memory budget, kernels: a resume may change them (after an OOM, say), but the pairs
    left then differ from an uninterrupted run's in the last bits; the run says so instead of nothing."""
    import logging

    from baer_fast.io.resumable import ResumableWriter
    out = str(tmp_path / "o.jsonl")
    with ResumableWriter(out, fingerprint={"k": 1}, settings={"chunk_pairs": 16, "kernels": "auto"}) as w:
        w.append([{"id": "a"}])
    with caplog.at_level(logging.WARNING, logger="baer_fast"):
        with ResumableWriter(out, fingerprint={"k": 1}, settings={"chunk_pairs": 16, "kernels": "auto"}) as w:
            assert w.done_ids == {"a"}
        assert not caplog.records
        with ResumableWriter(out, fingerprint={"k": 1}, settings={"chunk_pairs": 8, "kernels": "auto"}) as w:
            assert w.done_ids == {"a"}
    assert len(caplog.records) == 1 and "chunk_pairs 16 -> 8" in caplog.records[0].getMessage()


def test_a_run_on_another_device_or_dtype_does_not_resume(monkeypatch):
    """The fingerprint held the literal dtype "auto": a CPU fp32 run resumed on CUDA would mix bf16 runs in."""
    import argparse

    from baer_fast.commands import experts
    from baer_fast.runtime.model import load
    args = argparse.Namespace(device="auto", dtype="auto", backend="hf", naive=False)
    monkeypatch.setattr(load, "check_device", lambda d: "cpu")
    assert experts._runs_on(args) == {}
    monkeypatch.setattr(load, "check_device", lambda d: "cuda:0")
    assert experts._runs_on(args) == {"runs_on": "cuda/bfloat16"}
    args.dtype = "float32"
    assert experts._runs_on(args) == {"runs_on": "cuda/float32"}


def test_settings_are_warned_when_they_differ_and_not_when_the_old_record_lacks_them(tmp_path, caplog):
    """A setting added since the file was started (its record lacks the key) is not known to differ."""
    out = str(tmp_path / "o.jsonl")
    with ResumableWriter(out, fingerprint=FP, settings={"chunk_pairs": 4}) as w:
        w.append(_recs(0, 2))
    with caplog.at_level("WARNING", logger="baer_fast"):
        with ResumableWriter(out, fingerprint=FP, settings={"chunk_pairs": 4, "cpu_threads": 8}) as w:
            assert w.resumed
        assert "other engine settings" not in caplog.text
        with ResumableWriter(out, fingerprint=FP, settings={"chunk_pairs": 2, "cpu_threads": 8}) as w:
            assert w.resumed
    assert "chunk_pairs 4 -> 2" in caplog.text and "cpu_threads" not in caplog.text
