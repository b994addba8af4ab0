"""Inputs `import` must refuse with one located line (exit 2), never a traceback or a quietly wrong
pairs file: `.gz` files that are no gzip, cut short or Git LFS pointers; table labels, ids and cells."""
from __future__ import annotations

import gzip
import json
import shutil

import pytest

from baer_fast.cli import main
from baer_fast.commands.demo import sample_dir
from baer_fast.io.records import read_pairs

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


def test_a_blank_upstream_id_is_a_located_error(tmp_path, capsys):
    """JudgeBench keeps its pair_id as is: a blank one used to be written, then refused by the reader."""
    jb = tmp_path / "jb"
    (jb / "data").mkdir(parents=True)
    rows = [{"pair_id": pid, "source": "livebench-math", "question": "q", "response_A": "a",
             "response_B": "b", "label": "A>B"} for pid in ("p1", " ")]
    data = write_jsonl(jb / "data" / "dataset=judgebench,response_model=m.jsonl", rows)
    rc, out, cap = _import(["judgebench", jb], tmp_path, capsys)
    assert rc == 2 and cap.err.startswith(f"error: {data}:2: field 'pair_id': blank id"), cap.err


PKU = [{"prompt": f"q{i}", "response_0": f"r0 {i}", "response_1": f"r1 {i}", "better_response_id": i % 2}
       for i in range(4)]            # PKU-SafeRLHF's layout: better_response_id 0 = response_0 is better
PKU_ARGS = ["--question-col", "prompt", "--a-col", "response_0", "--b-col", "response_1",
            "--label-col", "better_response_id"]


def test_a_numeric_label_needs_label_values(tmp_path, capsys):
    """0/1 means a/b in PKU-SafeRLHF and tie/a elsewhere: a number is never guessed."""
    src = write_jsonl(tmp_path / "pku.jsonl", PKU)
    rc, out, cap = _import(["table", src, *PKU_ARGS], tmp_path, capsys)
    assert rc == 2 and not out.exists()
    assert cap.err.startswith(f"error: {src}:1: field 'better_response_id': label '0' is a number") \
        and "--label-values" in cap.err
    rc, out, cap = _import(["table", src, *PKU_ARGS, "--label-values", "0,1"], tmp_path, capsys)
    assert rc == 0
    assert [p.label for p in read_pairs(str(out / "pairs.jsonl"))] == ["a", "b", "a", "b"]


@pytest.mark.parametrize("cells, values, want", [
    (["1", "2", "0"], "1,2,0", ["a", "b", "tie"]),               # CSV text, the old implicit reading
    (["2", "1", "3"], "2,1,3", ["a", "b", "tie"]),
    (["A", "model_b", "TIE"], None, ["a", "b", "tie"]),          # spellings that say what they mean
    (["better", "worse", "same"], "better,worse,same", ["a", "b", "tie"]),
    (["b", "0", "1"], "0,1", ["b", "a", "b"]),
    (["1.0", "0.0", "+1"], "0,1", ["b", "a", "b"]),             # a float-formatted column (pandas to_csv)
    (["1", "2"], "1.0,2.0", ["a", "b"]),
])
def test_label_values_read_csv_cells(cells, values, want, tmp_path, capsys):
    src = tmp_path / "t.csv"
    src.write_text("q,x,y,lab\n" + "".join(f"q{i},x,y,{c}\n" for i, c in enumerate(cells)), encoding="utf-8")
    args = ["--question-col", "q", "--a-col", "x", "--b-col", "y", "--label-col", "lab"]
    rc, out, cap = _import(["table", src, *args, *(["--label-values", values] if values else [])], tmp_path, capsys)
    assert rc == 0, cap.err
    assert [p.label for p in read_pairs(str(out / "pairs.jsonl"))] == want


@pytest.mark.parametrize("extra, message", [
    (["--label-values", "0"], "two or three distinct values"),
    (["--label-values", "0,1,0"], "two or three distinct values"),
    (["--label-values", "0,,1"], "two or three distinct values"),
    (["--label-values", "1,1.0"], "the same number"),
    (["--label-values", "0,1", "--label-col", "lab", "--a-col", "x", "--b-col", "y"], None),
])
def test_label_values_are_checked_before_reading(extra, message, tmp_path, capsys):
    src = tmp_path / "t.csv"
    src.write_text("q,x,y,lab,good,bad\nq,x,y,5,g,b\n", encoding="utf-8")
    base = ["--question-col", "q"] + ([] if "--label-col" in extra else ["--label-col", "lab", "--a-col", "x",
                                                                          "--b-col", "y"])
    rc, _, cap = _import(["table", src, *base, *extra], tmp_path, capsys)
    assert rc == 2
    if message:
        assert cap.err.startswith("error: field '--label-values': ") and message in cap.err, cap.err
    else:
        assert f"{src}:2: field 'lab': label '5' is not one of --label-values 0,1" in cap.err, cap.err
    rc, _, cap = _import(["table", src, "--question-col", "q", "--chosen-col", "good", "--rejected-col", "bad",
                          "--label-values", "0,1"], tmp_path, capsys)
    assert rc == 2 and "field '--label-values': only means something with --label-col" in cap.err


@pytest.mark.parametrize("col, cell", [("key", ""), ("key", "   "), ("grp", ""), ("cat", " ")])
def test_a_blank_id_subset_or_category_cell_is_a_located_error(col, cell, tmp_path, capsys):
    """The pairs reader refuses a blank id, subset or category: refused at import, where the cell is."""
    src = tmp_path / "t.csv"
    cells = {"key": "k1", "grp": "g", "cat": "c", col: cell}
    src.write_text(f"q,good,bad,key,grp,cat\nq0,yes,no,k0,g,c\nq1,yes,no,{cells['key']},{cells['grp']},"
                   f"{cells['cat']}\n", encoding="utf-8")
    args = ["--question-col", "q", "--chosen-col", "good", "--rejected-col", "bad", "--id-col", "key",
            "--subset-col", "grp", "--category-col", "cat"]
    rc, out, cap = _import(["table", src, *args], tmp_path, capsys)
    assert rc == 2 and cap.err.startswith(f"error: {src}:3: field '{col}': blank cell"), cap.err
    assert not out.exists()
    rc, out, cap = _import(["table", src, *args, "--on-error", "skip"], tmp_path, capsys)
    assert rc == 0 and [p.id for p in read_pairs(str(out / "pairs.jsonl"))] == ["k0"]


@pytest.mark.parametrize("kind, option", [
    ("rewardbench", ["--question-col", "prompt"]),
    ("hh-rlhf", ["--chosen-col", "chosen"]),
    ("ultrafeedback", ["--label-values", "0,1"]),
    ("rewardbench", ["--rating", "fine-grained_score"]),
    ("table", ["--rating", "fine-grained_score"]),
])
def test_an_option_of_another_format_is_refused(kind, option, tmp_path, capsys):
    """`--*-col`/`--label-values` are table's, `--rating` ultrafeedback's: given to another format they
    would be ignored, and the pairs not what was asked for."""
    src = write_jsonl(tmp_path / "rb.jsonl", REWARDBENCH)
    table = ["--question-col", "prompt", "--chosen-col", "chosen", "--rejected-col", "rejected"] \
        if kind == "table" and option[0] == "--rating" else []
    rc, out, cap = _import([kind, src, *table, *option], tmp_path, capsys)
    assert rc == 2 and not out.exists()
    assert cap.err.startswith(f"error: field '{option[0]}': ") and kind in cap.err, cap.err
