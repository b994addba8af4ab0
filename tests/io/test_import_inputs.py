"""Inputs `import` must refuse with one located line (exit 2), never a traceback or a quietly wrong
pairs file: `.gz` files that are no gzip, cut short or Git LFS pointers; table labels, ids and cells."""
from __future__ import annotations

import gzip
import json
import shutil

import pytest

from baer_fast.cli import main
from baer_fast.commands.demo import sample_dir

from tests.io.schemas import REWARDBENCH, write_jsonl

LFS = (b"version https://git-lfs.github.com/spec/v1\n"
       b"oid sha256:8be3fc1a13b27901631696f2be6f184c799f1baeaf145f53ac5db24960adc37b\nsize 875191\n")


def _import(args, tmp_path, capsys):
    out = tmp_path / "out"
    rc = main(["import", *map(str, args), "--out", str(out)])
    return rc, out, capsys.readouterr()


def _hh_rows(n: int) -> bytes:
    return b"".join(json.dumps({"chosen": f"\n\nHuman: q{i}\n\nAssistant: yes {i}",
                                "rejected": f"\n\nHuman: q{i}\n\nAssistant: no {i}"}).encode() + b"\n"
                    for i in range(n))


@pytest.mark.parametrize("content, message", [
    (LFS, "Git LFS pointer file.*git lfs pull"),
    (_hh_rows(3), "named .gz but not a gzip file"),
    (gzip.compress(_hh_rows(400), mtime=0)[:1500], "truncated gzip file"),
    (gzip.compress(_hh_rows(400), mtime=0)[:40] + b"\xff" * 200, "damaged gzip data|truncated gzip file"),
], ids=["lfs-pointer", "not-gzip", "truncated", "damaged"])
def test_a_bad_jsonl_gz_is_one_located_error(content, message, tmp_path, capsys):
    src = tmp_path / "hh-rlhf" / "helpful-base" / "test.jsonl.gz"
    src.parent.mkdir(parents=True)
    src.write_bytes(content)
    rc, out, cap = _import(["hh-rlhf", tmp_path / "hh-rlhf"], tmp_path, capsys)
    assert rc == 2 and "Traceback" not in cap.err
    (line,) = cap.err.strip().splitlines()
    assert line.startswith(f"error: {src}") and __import__("re").search(message, line), line
    assert not out.exists()


@pytest.mark.parametrize("content, message", [
    (LFS, "Git LFS pointer file"),
    (gzip.compress(json.dumps(REWARDBENCH * 30).encode(), mtime=0)[:300], "truncated gzip file"),
    (json.dumps(REWARDBENCH).encode(), "not a gzip file"),
], ids=["lfs-pointer", "truncated", "not-gzip"])
def test_a_bad_json_gz_is_one_located_error(content, message, tmp_path, capsys):
    src = tmp_path / "rb.json.gz"
    src.write_bytes(content)
    rc, _, cap = _import(["rewardbench", src], tmp_path, capsys)
    assert rc == 2 and cap.err.startswith(f"error: {src}: ") and message in cap.err, cap.err


@pytest.mark.parametrize("name", ["filtered.parquet", "filtered.jsonl", "filtered.csv"])
def test_an_lfs_pointer_of_any_kind_says_git_lfs_pull(name, tmp_path, capsys):
    (tmp_path / "snap").mkdir()
    (tmp_path / "snap" / name).write_bytes(LFS)
    rc, _, cap = _import(["rewardbench", tmp_path / "snap"], tmp_path, capsys)
    assert rc == 2 and "git lfs pull" in cap.err and str(tmp_path / "snap" / name) in cap.err, cap.err


def test_judge_output_gz_files_are_located_errors(tmp_path, capsys):
    sub = tmp_path / "Natural"
    shutil.copytree(sample_dir(), sub)
    result = sub / "evaluators" / "LLaMA2" / "Vanilla" / "result.json.gz"
    result.write_bytes(result.read_bytes()[:100])
    rc, _, cap = _import(["llmbar", sub], tmp_path, capsys)
    assert rc == 2 and cap.err.startswith(f"error: {result}: truncated gzip file"), cap.err

    jb = tmp_path / "jb"
    (jb / "data").mkdir(parents=True)
    (jb / "outputs").mkdir()
    rows = [{"pair_id": "p1", "source": "livebench-math", "question": "q", "response_A": "a",
             "response_B": "b", "label": "A>B"}]
    write_jsonl(jb / "data" / "dataset=judgebench,response_model=m.jsonl", rows)
    bad = jb / "outputs" / "dataset=judgebench,response_model=m,judge_name=j,judge_model=x.jsonl.gz"
    bad.write_bytes(LFS)
    rc, _, cap = _import(["judgebench", jb], tmp_path, capsys)
    assert rc == 2 and cap.err.startswith(f"error: {bad}: a Git LFS pointer file"), cap.err
