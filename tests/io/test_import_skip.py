"""`import --on-error skip`: every importer keeps going past bad records and unreadable files,
counts them and keeps each in DIR/pairs.jsonl.rejects.jsonl with its text; when nothing is left the
error names SRC, the rejects file and the first error; a later import never leaves a stale one."""
from __future__ import annotations

import gzip
import json
import shutil


from baer_fast.cli import main
from baer_fast.commands.demo import sample_dir
from baer_fast.io.records import read_pairs, read_signals

from tests.io.schemas import REWARDBENCH, write_jsonl


def _import(args, out, capsys):
    rc = main(["import", *map(str, args), "--out", str(out)])
    return rc, capsys.readouterr()


def _rejects(out) -> list[dict]:
    with open(out / "pairs.jsonl.rejects.jsonl", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def test_skip_goes_past_empty_all_bad_and_unreadable_files(tmp_path, capsys, caplog):
    src = tmp_path / "mixed"
    src.mkdir()
    (src / "a.json").write_text(json.dumps(REWARDBENCH[:2]), encoding="utf-8")
    (src / "b_empty.jsonl").write_text("")
    (src / "c_bad.jsonl").write_text("{bad\nnope\n")
    (src / "d_cut.jsonl.gz").write_bytes(gzip.compress(b"".join(json.dumps(r).encode() + b"\n"
                                                                for r in REWARDBENCH[2:] * 50), mtime=0)[:60])
    rc, cap = _import(["rewardbench", src], tmp_path / "raise", capsys)
    assert rc == 2 and "b_empty.jsonl: empty file" in cap.err
    with caplog.at_level("WARNING", logger="baer_fast"):
        rc, cap = _import(["rewardbench", src, "--on-error", "skip"], tmp_path / "out", capsys)
    assert rc == 0, cap.err
    assert [p.id for p in read_pairs(str(tmp_path / "out" / "pairs.jsonl"))] == ["rewardbench-30", "rewardbench-4001"]
    rej = _rejects(tmp_path / "out")
    assert [(r["file"].rsplit("/", 1)[1], r["line"]) for r in rej] == [
        ("b_empty.jsonl", None), ("c_bad.jsonl", 1), ("c_bad.jsonl", 2), ("d_cut.jsonl.gz", 1)]
    assert "truncated gzip" in rej[-1]["error"] and "skipped 4 bad record(s)" in cap.out
    for name in ("b_empty.jsonl", "c_bad.jsonl", "d_cut.jsonl.gz"):
        assert f"skipped {src / name}" in caplog.text


def test_rejected_json_csv_and_parquet_rows_keep_their_record(tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    bad = dict(REWARDBENCH[1], chosen=3)
    rows = [REWARDBENCH[0], bad]
    (tmp_path / "rb.json").write_text(json.dumps(rows + ["not an object"]), encoding="utf-8")
    pq.write_table(pa.Table.from_pylist([REWARDBENCH[0], dict(bad, chosen=None)]), tmp_path / "rb.parquet")
    (tmp_path / "t.csv").write_text("q,good,bad,key\nq0,yes,no,k0\nq1,yes,no,\n", encoding="utf-8")
    table = ["--question-col", "q", "--chosen-col", "good", "--rejected-col", "bad", "--id-col", "key"]
    for name, args, want in (("rb.json", [], [bad, "not an object"]),
                             ("rb.parquet", [], [dict(bad, chosen=None)]),
                             ("t.csv", ["table", *table], [{"q": "q1", "good": "yes", "bad": "no", "key": ""}])):
        out = tmp_path / f"out-{name}"
        rc, cap = _import([*(args[:1] or ["rewardbench"]), tmp_path / name, *args[1:], "--on-error", "skip"], out, capsys)
        assert rc == 0, cap.err
        assert [json.loads(r["raw"]) for r in _rejects(out)] == want


def test_evalbiasbench_skip_keeps_a_non_object_record(tmp_path, capsys):
    recs = [{"bias": "length", "instruction": "i", "response1": "x", "response2": "y", "label": 1}, 7]
    (tmp_path / "b.json").write_text(json.dumps({"length": recs}), encoding="utf-8")
    rc, cap = _import(["evalbiasbench", tmp_path / "b.json", "--on-error", "skip"], tmp_path / "out", capsys)
    assert rc == 0, cap.err
    (rej,) = _rejects(tmp_path / "out")
    assert (rej["line"], rej["raw"]) == (2, "7")


def test_skip_with_every_row_bad_writes_the_rejects_and_names_them(tmp_path, capsys):
    src = write_jsonl(tmp_path / "allbad.jsonl", [dict(r, chosen=1) for r in REWARDBENCH[:2]])
    out = tmp_path / "out"
    rc, cap = _import(["rewardbench", src, "--on-error", "skip"], out, capsys)
    assert rc == 2
    rejects = out / "pairs.jsonl.rejects.jsonl"
    assert cap.err.strip() == (f"error: {src}: no pairs imported (0 dropped, 2 rejected); the 2 rejected record(s) "
                               f"are in {rejects} (first: {src}:1: field 'chosen': expected str, got int)")
    assert [r["line"] for r in _rejects(out)] == [1, 2] and not (out / "pairs.jsonl").exists()


def test_a_later_import_removes_or_replaces_an_earlier_rejects_file(tmp_path, capsys, caplog):
    one_bad = write_jsonl(tmp_path / "onebad.jsonl", [REWARDBENCH[0], dict(REWARDBENCH[1], chosen=1)])
    good = write_jsonl(tmp_path / "good.jsonl", REWARDBENCH[:2])
    out = tmp_path / "out"
    assert _import(["rewardbench", one_bad, "--on-error", "skip"], out, capsys)[0] == 0
    rc, cap = _import(["rewardbench", good, "--on-error", "skip"], out, capsys)
    assert rc == 0 and "skipped 0 bad record(s)" in cap.out and "replacing an earlier import's" in cap.out
    assert _rejects(out) == []
    assert _import(["rewardbench", one_bad, "--on-error", "skip"], out, capsys)[0] == 0
    with caplog.at_level("WARNING", logger="baer_fast"):
        rc, cap = _import(["rewardbench", good], out, capsys)
    assert rc == 0 and sorted(p.name for p in out.iterdir()) == ["pairs.jsonl"]
    assert f"removed {out / 'pairs.jsonl.rejects.jsonl'}: an earlier --on-error skip import's rejects" in caplog.text


def _signals(out, name=None) -> dict:
    (path,) = [p for p in out.iterdir() if p.name == name or not name and p.name.startswith("signals.")]
    return {s.id: s.experts for s in read_signals(str(path))}


def _skip_import(kind, src, out, capsys, bank=None):
    rc, cap = _import([kind, src], out.with_name(out.name + "-raise"), capsys)
    assert rc == 2 and not out.with_name(out.name + "-raise").exists()
    rc, cap = _import([kind, src, "--on-error", "skip"], out, capsys)
    assert rc == 0, cap.err
    return [p.id for p in read_pairs(str(out / "pairs.jsonl"))], _signals(out, bank), _rejects(out)


def test_autoj_skip_drops_a_bad_pair_and_misses_a_bad_verdict(tmp_path, capsys):
    src = tmp_path / "autoj"
    rows = [{"scenario": "chat", "label": i % 3, "prompt": f"p{i}", "response 1": "x", "response 2": "y"}
            for i in range(4)]
    lines = [json.dumps(r) for r in rows]
    lines[1] = lines[1][:30]                                  # a cut pair line
    src.mkdir()
    (src / "testdata_pairwise.jsonl").write_text("\n".join(lines) + "\n")
    (src / "pairwise_example_output.jsonl").write_text('{"output": 0}\n{"output": 0}\n{"output": 1}\n{"output": 2}\n')
    (src / "pairwise_exchange_example_output.jsonl").write_text('{"output": 1}\n{"output": 1}\nnot json\n{"output": 2}\n')
    ids, signals, rej = _skip_import("autoj", src, tmp_path / "out", capsys)
    assert ids == ["autoj-0000", "autoj-0002", "autoj-0003"]
    assert [signals[i]["autoj-13b"] for i in ids] == [[1.0, 1.0], [0.0, None], [0.5, 0.5]]
    assert [(r["file"].rsplit("/", 1)[1], r["line"]) for r in rej] == [
        ("testdata_pairwise.jsonl", 2), ("pairwise_exchange_example_output.jsonl", 3)]


def test_llmbar_skip_drops_a_bad_item_and_misses_a_bad_result(tmp_path, capsys):
    sub = tmp_path / "Natural"
    shutil.copytree(sample_dir(), sub)
    items = json.loads((sub / "dataset.json").read_text())
    del items[1]["output_2"]
    (sub / "dataset.json").write_text(json.dumps(items))
    result = sub / "evaluators" / "LLaMA2" / "Vanilla" / "result.json.gz"
    runs = json.loads(gzip.decompress(result.read_bytes()))
    runs[3]["results"] = []
    result.write_bytes(gzip.compress(json.dumps(runs).encode()))
    ids, signals, rej = _skip_import("llmbar", sub, tmp_path / "out", capsys, bank="signals.LLaMA2.jsonl")
    assert len(ids) == len(items) - 1 and "Natural-0001" not in ids and "Natural-0001" not in signals
    assert signals["Natural-0003"]["Vanilla"] == [None, None] and signals["Natural-0004"]["Vanilla"] != [None, None]
    assert [(r["line"], r["field"]) for r in rej] == [(2, "output_2"), (4, "results")]
    assert json.loads(rej[0]["raw"]) == items[1]


def test_judgebench_skip_drops_a_bad_pair_row_and_a_bad_verdict(tmp_path, capsys):
    src = tmp_path / "jb"
    (src / "data").mkdir(parents=True)
    (src / "outputs").mkdir()
    stem = "dataset=judgebench,response_model=gpt-4o-2024-05-13"
    rows = [{"pair_id": f"p{i}", "source": "livebench-math", "question": f"q{i}", "response_A": "a",
             "response_B": "b", "label": "A>B"} for i in range(3)]
    rows[1]["label"] = "A>>B"
    write_jsonl(src / "data" / f"{stem}.jsonl", rows)
    verdicts = [{"pair_id": f"p{i}", "judgments": [{"decision": "A>B"}, {"decision": "B>A"}]} for i in range(3)]
    verdicts[2]["judgments"] = [{"decision": "A>B"}]
    write_jsonl(src / "outputs" / f"{stem},judge_name=arena_hard,judge_model=j.jsonl", verdicts)
    ids, signals, rej = _skip_import("judgebench", src, tmp_path / "out", capsys)
    assert ids == ["p0", "p2"] and signals == {"p0": {"arena_hard:j": [1.0, 1.0]}, "p2": {"arena_hard:j": [None, None]}}
    assert [(r["line"], r["field"]) for r in rej] == [(2, "label"), (2, "pair_id"), (3, "judgments")]
    assert "its row there was rejected" in rej[1]["error"]


def test_pandalm_skip_drops_a_bad_pair_record(tmp_path, capsys):
    src = tmp_path / "pandalm"
    src.mkdir()
    test = [{"idx": i, "instruction": "i", "input": "", "response1": "a", "response2": "b",
             "annotator1": 1, "annotator2": 1, "annotator3": 2} for i in range(3)]
    test[1]["annotator3"] = "2"
    (src / "testset-v1.json").write_text(json.dumps(test + [test[0]]))
    (src / "gpt-3.5-turbo-testset-v1.json").write_text(json.dumps([{"idx": i, "gpt_result": "1"} for i in range(3)]))
    (src / "pandalm-7b-testset-v1.json").write_text(json.dumps([{"idx": i, "pandalm_result": 2} for i in range(3)] + [5]))
    ids, signals, rej = _skip_import("pandalm", src, tmp_path / "out", capsys)
    assert ids == ["pandalm-0000", "pandalm-0002"]
    assert signals["pandalm-0002"] == {"gpt-3.5-turbo": [1.0], "pandalm-7b": [0.0]}
    assert [(r["line"], r["field"]) for r in rej] == [(2, "annotator3"), (4, "idx"), (4, None)]
