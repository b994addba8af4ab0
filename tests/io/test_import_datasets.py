"""Pair importers: real files checked against the source; schema fixtures for the rest."""
from __future__ import annotations

import gzip
import json
import math
from collections import Counter

import pytest

from baer_fast.cli import main
from baer_fast.errors import InputError
from baer_fast.io.adapters import load
from baer_fast.io.adapters._rows import a_is_chosen
from baer_fast.io.records import read_pairs

from tests.fixtures.data import shared
from tests.io.schemas import ARENA, MTBENCH, REWARDBENCH, ULTRAFEEDBACK, write_jsonl

HH = "hh_rlhf_helpful_base_test/helpful-base/test.jsonl.gz"


def _import(args, tmp_path, capsys):
    out = tmp_path / "out"
    rc = main(["import", *map(str, args), "--out", str(out)])
    return rc, out, capsys.readouterr()


def _balanced(n_a: int, n_b: int) -> bool:
    # a fair hash puts chosen on a with p = 1/2: within 4 standard deviations of n/2
    n = n_a + n_b
    return abs(n_a - n / 2) <= 4 * math.sqrt(n / 4)


def test_hh_rlhf_real_file_counts_sides_and_balance(tmp_path, capsys):
    src = shared(HH)
    rows = [json.loads(line) for line in gzip.open(src, "rt", encoding="utf-8")]
    rc, out, cap = _import(["hh-rlhf", src.parent], tmp_path, capsys)
    assert rc == 0
    pairs = read_pairs(str(out / "pairs.jsonl"))
    assert len(pairs) == len(rows) == 2354
    labels = Counter(p.label for p in pairs)
    assert labels["tie"] == sum(r["chosen"] == r["rejected"] for r in rows) == 2
    assert _balanced(labels["a"], labels["b"]) and labels["a"] and labels["b"]
    assert "pairs.jsonl: 2354 pairs" in cap.out
    checked = 0
    for p, r in zip(pairs, rows):
        k_c, k_r = r["chosen"].rfind("\n\nAssistant: "), r["rejected"].rfind("\n\nAssistant: ")
        if r["chosen"][:k_c] != r["rejected"][:k_r] or p.label == "tie":
            continue           # the README's 9 irregular rows and the 2 identical ones
        chosen = r["chosen"][k_c + len("\n\nAssistant: "):]
        winner, loser = (p.response_a, p.response_b) if p.label == "a" else (p.response_b, p.response_a)
        assert winner == chosen and loser == r["rejected"][k_r + len("\n\nAssistant: "):]
        assert (p.label == "a") == a_is_chosen(p.id) == (p.meta["origin_a"] == "chosen")
        n_human = r["chosen"][:k_c].count("\n\nHuman: ")
        assert isinstance(p.question, str) == (n_human == 1)
        last_human = r["chosen"][:k_c].rsplit("\n\nHuman: ", 1)[1]
        assert (p.question if isinstance(p.question, str) else p.question[-1][1]) == last_human
        checked += 1
    assert checked == 2354 - 9 - 2
    assert {p.subset for p in pairs} == {"helpful-base"} and {p.category for p in pairs} == {"helpful"}


def test_hh_rlhf_import_is_deterministic(tmp_path, capsys):
    src = shared(HH)
    _import(["hh-rlhf", src], tmp_path / "1", capsys)
    _import(["hh-rlhf", src], tmp_path / "2", capsys)
    assert (tmp_path / "1/out/pairs.jsonl").read_bytes() == (tmp_path / "2/out/pairs.jsonl").read_bytes()


def test_judgebench_pairs_get_their_category():
    imported = load("judgebench", str(shared("judgebench_gpt4o")))
    cats = Counter(p.category for p in imported.pairs)
    assert cats == {"knowledge": 154, "reasoning": 98, "math": 56, "coding": 42}     # README's source counts
    (signals,) = imported.banks.values()
    assert [s.category for s in signals] == [p.category for p in imported.pairs]


def test_rewardbench_sections_sides_and_meta(sources):
    src, _ = sources["rewardbench"]
    pairs = load("rewardbench", str(src)).pairs
    assert [p.id for p in pairs] == [f"rewardbench-{r['id']}" for r in REWARDBENCH]
    assert [p.category for p in pairs] == ["chat", "reasoning", "safety", "chat-hard", "reasoning", None]
    for p, r in zip(pairs, REWARDBENCH):
        side = "a" if a_is_chosen(p.id) else "b"
        assert p.label == side and getattr(p, f"response_{side}") == r["chosen"]
        assert p.meta[f"model_{side}"] == r["chosen_model"] and p.meta[f"origin_{side}"] == "chosen"
        assert p.subset == r["subset"] and p.question == r["prompt"]
    assert {p.label for p in pairs} == {"a", "b"}        # both sides occur in six ids


def test_ultrafeedback_highest_vs_lowest_ties_dropped(sources):
    src, _ = sources["ultrafeedback"]
    imported = load("ultrafeedback", str(src))
    pairs = imported.pairs
    assert len(pairs) == 2
    first, colour = pairs
    best, worst = ("Lists are ordered and mutable.", "No idea.")
    win = first.response_a if first.label == "a" else first.response_b
    lose = first.response_b if first.label == "a" else first.response_a
    assert (win, lose) == (best, worst) and first.subset == "evol_instruct"
    # equal top ratings: the first of them ("Blue.") is taken
    assert {colour.response_a, colour.response_b} == {"Blue.", "Seven."}
    assert imported.dropped == {"all ratings tied": 1, "fewer than two rated completions": 1}
    by_fine = load("ultrafeedback", str(src), options=type("O", (), {"rating": "fine-grained_score"})).pairs
    assert len(by_fine) == 3          # fine-grained scores 4.0 vs 3.5 are not tied


def test_mtbench_turns_ties_and_categories(sources):
    src, _ = sources["mtbench-human"]
    p1, p2, p3 = load("mtbench-human", str(src)).pairs
    assert (p1.label, p2.label, p3.label) == ("b", "a", "tie")
    assert (p1.category, p3.category) == ("writing", "math")
    assert p1.question == "Write a haiku about rain." and p1.response_b == "Drops fall on the roof."
    # turn 2: the models' first answers differ, so each response carries its own first answer
    assert p2.question == "Write a haiku about rain." and p2.subset == "turn2"
    assert p2.response_a == "Rain taps the window.\n\nUser: Now make it sadder.\n\nAssistant: Grey rain, lonely glass."
    assert p2.meta["diverged"] and p2.meta["model_a"] == "alpaca-13b"


def test_arena_multi_turn_and_bothbad_ties(sources):
    src, _ = sources["arena"]
    pairs = load("arena", str(src)).pairs
    assert [p.id for p in pairs] == [f"arena-{r['question_id']}" for r in ARENA]
    assert [p.label for p in pairs] == ["b", "tie", "a", "tie"]
    assert pairs[1].meta["tie_kind"] == "tie (bothbad)" and pairs[3].meta["tie_kind"] == "tie"
    assert pairs[1].response_b == "I do not know jokes.\n\nUser: Another one\n\nAssistant: Still none."


def test_shared_history_becomes_a_conversation(tmp_path):
    rows = [dict(MTBENCH[0], conversation_a=[*MTBENCH[0]["conversation_b"][:3], {"role": "assistant", "content": "x"}],
                 turn=2)]
    (p,) = load("mtbench-human", str(write_jsonl(tmp_path / "m.jsonl", rows))).pairs
    assert p.question == (("user", "Write a haiku about rain."), ("assistant", "Drops fall on the roof."),
                          ("user", "Now make it sadder."))
    assert (p.response_a, p.response_b) == ("x", "Cold drops, empty roof.")
    assert p.to_json()["question"][1] == {"role": "assistant", "content": "Drops fall on the roof."}


def test_table_chosen_rejected_csv_and_labelled_parquet_and_json(sources, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    src, args = sources["table"]
    opts = _opts(args)
    pairs = load("table", str(src), options=opts).pairs
    assert [p.id for p in pairs] == ["mine-2", "mine-3", "mine-4"]          # csv line numbers
    assert [p.subset for p in pairs] == ["nums", "greet", "greet"]
    third = pairs[2]
    assert third.question == "Two, words" and "yes, both" in (third.response_a, third.response_b)
    rows = [{"q": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"},
                   {"role": "user", "content": "bye?"}], "x": "ok", "y": "no", "win": "B", "key": "k1"},
            {"q": [{"role": "user", "content": "plain"}], "x": "one", "y": "two", "win": "tie", "key": "k2"}]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "t.parquet")
    (tmp_path / "t.json").write_text(json.dumps(rows), encoding="utf-8")
    for name in ("t.parquet", "t.json"):
        got = load("table", str(tmp_path / name), options=_opts(["--question-col", "q", "--a-col", "x", "--b-col", "y",
                                                                  "--label-col", "win", "--id-col", "key"])).pairs
        assert [(p.id, p.label) for p in got] == [("k1", "b"), ("k2", "tie")]
        assert got[0].question[-1] == ("user", "bye?") and got[1].question == "plain"


def test_table_csv_cells_are_text_and_may_span_lines_past_a_block(tmp_path, capsys):
    """Multi-line answers in a CSV larger than pyarrow's 1 MB parse block, numeric-looking
    answers ("42" is text, not an int), a byte-order mark, and records located at their first line."""
    import csv as csv_mod

    path = tmp_path / "qa.csv"
    with open(path, "w", newline="", encoding="utf-8-sig") as f:
        w = csv_mod.writer(f)
        w.writerow(["q", "good", "bad"])
        w.writerow(["What is 6*7?", "42", "41"])
        for i in range(3000):
            w.writerow([f"poem {i}", "line one\nline two " * 20, "no\nrhyme"])
    assert path.stat().st_size > 1 << 20
    opts = _opts(["--question-col", "q", "--chosen-col", "good", "--rejected-col", "bad"])
    pairs = load("table", str(path), options=opts).pairs
    assert len(pairs) == 3001 and {pairs[0].response_a, pairs[0].response_b} == {"42", "41"}
    # a poem's record holds 21 newlines, so it spans 22 lines: poem 0 is lines 3-24, poem 1 starts at 25
    assert [p.id for p in pairs[:3]] == ["qa-2", "qa-3", "qa-25"]
    assert pairs[2].question == "poem 1" and "no\nrhyme" in (pairs[2].response_a, pairs[2].response_b)
    (tmp_path / "ragged.csv").write_text("q,good,bad\nfine,yes,no\n\"two\nlines\",only\nok,a,b\n", encoding="utf-8")
    with pytest.raises(InputError, match="expected 3 cells") as err:
        load("table", str(tmp_path / "ragged.csv"), options=opts)
    assert err.value.line == 3
    rc, out, cap = _import(["table", tmp_path / "ragged.csv", "--question-col", "q", "--chosen-col", "good",
                            "--rejected-col", "bad", "--on-error", "skip"], tmp_path, capsys)
    assert rc == 0 and [p.id for p in read_pairs(str(out / "pairs.jsonl"))] == ["ragged-2", "ragged-5"]
    (rej,) = [json.loads(line) for line in open(out / "pairs.jsonl.rejects.jsonl", encoding="utf-8")]
    assert rej["line"] == 3 and "two" in rej["raw"]


def _opts(args):
    import argparse

    from baer_fast.commands.import_ import add_arguments

    p = argparse.ArgumentParser()
    add_arguments(p)
    return p.parse_args(["table", "-", "--out", "-", *args])


@pytest.mark.parametrize("fmt", ["rewardbench", "ultrafeedback", "mtbench-human", "arena", "table"])
def test_every_importer_writes_pairs_and_counts(fmt, sources, tmp_path, capsys):
    src, args = sources[fmt]
    rc, out, cap = _import([fmt, src, *args], tmp_path, capsys)
    assert rc == 0
    pairs = read_pairs(str(out / "pairs.jsonl"))
    assert pairs and cap.out.startswith(f"pairs.jsonl: {len(pairs)} pairs")
    assert sorted(p.name for p in out.iterdir()) == ["pairs.jsonl"]        # pairs only: no judge outputs


def test_bad_row_is_located_and_nothing_is_written(tmp_path, capsys):
    rows = [ARENA[0], dict(ARENA[2], winner="model_c"), ARENA[3]]
    src = write_jsonl(tmp_path / "battles.jsonl", rows)
    rc, out, cap = _import(["arena", src], tmp_path, capsys)
    assert rc == 2 and f"{src}:2: field 'winner'" in cap.err
    assert not (out / "pairs.jsonl").exists()


def test_on_error_skip_keeps_the_rest_and_writes_rejects(tmp_path, capsys):
    rows = [ARENA[0], dict(ARENA[2], conversation_a=[{"role": "user", "content": "Sum 2 and 3"}]), ARENA[3]]
    src = write_jsonl(tmp_path / "battles.jsonl", rows)
    rc, out, cap = _import(["arena", src, "--on-error", "skip"], tmp_path, capsys)
    assert rc == 0
    assert [p.id for p in read_pairs(str(out / "pairs.jsonl"))] == [f"arena-{ARENA[i]['question_id']}" for i in (0, 3)]
    (rej,) = [json.loads(line) for line in open(out / "pairs.jsonl.rejects.jsonl", encoding="utf-8")]
    assert (rej["line"], rej["field"]) == (2, "conversation_a") and "skipped 1 bad record(s)" in cap.out


def test_duplicate_ids_and_bad_conversations_are_errors(tmp_path, capsys):
    src = write_jsonl(tmp_path / "rb.jsonl", [REWARDBENCH[0], REWARDBENCH[0]])
    rc, _, cap = _import(["rewardbench", src], tmp_path, capsys)
    assert rc == 2 and ":2: field 'id': duplicate id 'rewardbench-30'" in cap.err
    row = dict(ARENA[0], conversation_b=[{"role": "user", "content": "Other"}, {"role": "assistant", "content": "x"}])
    rc, _, cap = _import(["arena", write_jsonl(tmp_path / "a.jsonl", [row])], tmp_path, capsys)
    assert rc == 2 and "do not open with the same user turn" in cap.err
    rc, _, cap = _import(["table", tmp_path / "rb.jsonl", "--question-col", "prompt"], tmp_path, capsys)
    assert rc == 2 and "--chosen-col" in cap.err


def test_evalbiasbench_real_file_counts_sides_and_balance(tmp_path, capsys):
    src = shared("evalbiasbench/biasbench.shared.json")
    raw = json.loads(src.read_text(encoding="utf-8"))
    records = [r for group in raw.values() for r in group]
    rc, out, cap = _import(["evalbiasbench", src.parent], tmp_path, capsys)
    assert rc == 0 and "pairs.jsonl: 41 pairs" in cap.out
    pairs = read_pairs(str(out / "pairs.jsonl"))
    # the README's per-category counts; upstream every label is 1 (response1 better)
    assert Counter(p.subset for p in pairs) == {"length bias": 9, "concreteness": 7, "empty reference": 7,
                                                "content_continuation": 6, "nested_instruction": 6,
                                                "familiar knowledge preference bias": 6}
    assert {r["label"] for r in records} == {1}
    labels = Counter(p.label for p in pairs)
    assert labels["a"] and labels["b"] and _balanced(labels["a"], labels["b"])
    for p, r in zip(pairs, records):
        winner, loser = (p.response_a, p.response_b) if p.label == "a" else (p.response_b, p.response_a)
        assert (p.question, winner, loser) == (r["instruction"], r["response1"], r["response2"])
        assert (p.label == "a") == a_is_chosen(p.id) == (p.meta["source_field_a"] == "response1")
    assert len({p.id for p in pairs}) == 41


def test_evalbiasbench_layouts_labels_and_located_errors(tmp_path, capsys):
    rec = {"instruction": "Name a prime.", "response1": "9", "response2": "7", "label": 2}
    as_dict = tmp_path / "d" / "biasbench.json"
    as_dict.parent.mkdir()
    as_dict.write_text(json.dumps({"concreteness": [rec, dict(rec, instruction="Another", label=1)]}))
    as_list = tmp_path / "l.json"
    as_list.write_text(json.dumps([dict(rec, bias="concreteness"), dict(rec, instruction="Another", label=1,
                                                                        bias="concreteness")]))
    a, b = load("evalbiasbench", str(as_dict)).pairs, load("evalbiasbench", str(as_list)).pairs
    assert [(p.id, p.label, p.subset, p.response_a) for p in a] == [(p.id, p.label, p.subset, p.response_a) for p in b]
    first = a[0]
    assert ({first.response_a, first.response_b}, first.subset) == ({"9", "7"}, "concreteness")
    assert (first.response_a if first.label == "a" else first.response_b) == "7"       # label 2: response2 better
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"length bias": [rec, dict(rec, instruction="x", label=3)]}))
    rc, out, cap = _import(["evalbiasbench", bad], tmp_path, capsys)
    assert rc == 2 and f"{bad}:2: field 'label'" in cap.err and not (out / "pairs.jsonl").exists()
    (tmp_path / "skip").mkdir()
    rc, out, cap = _import(["evalbiasbench", bad, "--on-error", "skip"], tmp_path / "skip", capsys)
    assert rc == 0 and [p.question for p in read_pairs(str(out / "pairs.jsonl"))] == ["Name a prime."]
    (rej,) = [json.loads(line) for line in open(out / "pairs.jsonl.rejects.jsonl", encoding="utf-8")]
    assert (rej["line"], rej["field"]) == (2, "label")
    bad.write_text(json.dumps({"length bias": "not a list"}))
    rc, _, cap = _import(["evalbiasbench", bad], tmp_path, capsys)
    assert rc == 2 and "expected a list of records" in cap.err


def test_llmbar_finds_subsets_at_any_depth_and_refuses_colliding_names(tmp_path):
    """Upstream nests subsets at two depths (Dataset/LLMBar/Natural and
    Dataset/LLMBar/Adversarial/<subset>): pointing at a folder above them imports every one."""
    import shutil

    from baer_fast.commands.demo import sample_dir
    from baer_fast.errors import InputError

    root = tmp_path / "Dataset" / "LLMBar"
    shutil.copytree(sample_dir(), root / "Natural")
    shutil.copytree(sample_dir(), root / "Adversarial" / "Neighbor")
    alone = load("llmbar", sample_dir())
    for src in (tmp_path / "Dataset", root):
        got = load("llmbar", str(src))
        assert Counter(p.subset for p in got.pairs) == {"Natural": len(alone.pairs), "Neighbor": len(alone.pairs)}
        assert len({p.id for p in got.pairs}) == 2 * len(alone.pairs)
        assert sorted(got.banks) == sorted(alone.banks)
        assert all(len(recs) == 2 * len(alone.banks[b]) for b, recs in got.banks.items())
    assert [p.id for p in load("llmbar", str(root / "Adversarial")).pairs][0].startswith("Neighbor-")

    links = tmp_path / "links"
    links.mkdir()
    (links / "Neighbor").symlink_to(root / "Adversarial" / "Neighbor")
    (links / "loop").symlink_to(links)
    assert Counter(p.subset for p in load("llmbar", str(links)).pairs) == {"Neighbor": len(alone.pairs)}

    shutil.copytree(sample_dir(), tmp_path / "Dataset" / "Copy" / "Natural")
    with pytest.raises(InputError, match="two subsets named 'Natural'"):
        load("llmbar", str(tmp_path / "Dataset"))
    (tmp_path / "empty" / "sub").mkdir(parents=True)
    with pytest.raises(InputError, match="no dataset.json in this folder or below it"):
        load("llmbar", str(tmp_path / "empty"))


def _judgebench_set(root, model: str, ids: list[str], judges: dict[str, list[str]]):
    """A JudgeBench response set in upstream's layout: data/<stem>.jsonl and one
    outputs/<stem>,judge_name=...,judge_model=<judge>.jsonl per judge (decisions per pair, both orders)."""
    stem = f"dataset=judgebench,response_model={model}"
    (root / "data").mkdir(parents=True, exist_ok=True)
    (root / "outputs").mkdir(exist_ok=True)
    rows = [{"pair_id": i, "original_id": n, "source": "livebench-math", "question": f"q {i}",
             "response_model": model, "response_A": f"a {i}", "response_B": f"b {i}", "label": "A>B"}
            for n, i in enumerate(ids)]
    (root / "data" / f"{stem}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    for judge, decisions in judges.items():
        out = [dict(r, judge_name="arena_hard", judgments=[{"judgment": {}, "decision": d1}, {"judgment": {}, "decision": d2}])
               for r, (d1, d2) in zip(rows, (d.split("|") for d in decisions))]
        (root / "outputs" / f"{stem},judge_name=arena_hard,judge_model={judge}.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in out))


def test_judgebench_imports_each_response_set_as_its_own_condition(tmp_path):
    from baer_fast.errors import InputError

    _judgebench_set(tmp_path, "gpt-4o-2024-05-13", ["g1", "g2"], {"j1": ["A>B|B>A", "B>A|A>B"]})
    _judgebench_set(tmp_path, "claude-3-5-sonnet-20240620", ["c1", "c2", "c3"],
                    {"j2": ["A>B|A>B", "B>A|B>A", "A>B|B>A"], "j3": ["B>A|A>B"] * 3})
    got = load("judgebench", str(tmp_path))
    assert sorted(got.banks) == ["judgebench-claude-3-5-sonnet-20240620", "judgebench-gpt-4o-2024-05-13"]
    gpt, claude = got.banks["judgebench-gpt-4o-2024-05-13"], got.banks["judgebench-claude-3-5-sonnet-20240620"]
    assert [s.id for s in gpt] == ["g1", "g2"] and [s.id for s in claude] == ["c1", "c2", "c3"]
    assert {k for s in gpt for k in s.experts} == {"arena_hard:j1"}
    assert {k for s in claude for k in s.experts} == {"arena_hard:j2", "arena_hard:j3"}
    # the second order is coded by displayed position: "B>A" there says the first response (a) wins
    assert gpt[0].experts["arena_hard:j1"] == [1.0, 1.0] and claude[0].experts["arena_hard:j2"] == [1.0, 0.0]
    assert len(got.pairs) == 5 and "2 pairs, 1 judge -> condition judgebench-gpt-4o" in got.notes[0]

    stray = tmp_path / "outputs" / "dataset=judgebench,response_model=other,judge_name=x,judge_model=y.jsonl"
    stray.write_text("")
    with pytest.raises(InputError, match="extends no data/ pair file's name"):
        load("judgebench", str(tmp_path))
    stray.unlink()
    _judgebench_set(tmp_path, "other", ["g1"], {})
    with pytest.raises(InputError, match=r"field 'pair_id': duplicate id 'g1' \(first at .*gpt-4o"):
        load("judgebench", str(tmp_path))


def test_judgebench_hub_snapshot_gives_pairs_and_bad_rows_are_located(tmp_path, capsys, caplog):
    """The hub copy keeps each response set as data/<split>-*.parquet with no judge outputs: pairs
    only, one condition name per set from its rows. A malformed pair row or judgments list is a
    located error, not a KeyError."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp_path / "hub" / "data").mkdir(parents=True)
    for split, model in (("gpt", "gpt-4o-2024-05-13"), ("claude", "claude-3-5-sonnet-20240620")):
        rows = [{"pair_id": f"{split}{i}", "original_id": str(i), "source": "livecodebench", "question": "q",
                 "response_model": model, "response_A": "a", "response_B": "b", "label": "B>A"} for i in range(2)]
        pq.write_table(pa.Table.from_pylist(rows), tmp_path / "hub" / "data" / f"{split}-00000-of-00001.parquet")
    with caplog.at_level("INFO", logger="baer_fast"):
        rc, out, cap = _import(["judgebench", tmp_path / "hub"], tmp_path, capsys)
    assert rc == 0 and sorted(p.name for p in out.iterdir()) == ["pairs.jsonl"]
    pairs = read_pairs(str(out / "pairs.jsonl"))
    assert [p.id for p in pairs] == ["claude0", "claude1", "gpt0", "gpt1"] and {p.label for p in pairs} == {"b"}
    assert "2 pairs of judgebench-claude-3-5-sonnet-20240620 (no judge outputs: pairs only)" in caplog.text

    _judgebench_set(tmp_path / "gh", "gpt-4o-2024-05-13", ["g1"], {"j1": ["A>B|B>A"]})
    pair_file = tmp_path / "gh" / "data" / "dataset=judgebench,response_model=gpt-4o-2024-05-13.jsonl"
    good = pair_file.read_text()
    pair_file.write_text(json.dumps({k: v for k, v in json.loads(good).items() if k != "question"}) + "\n")
    with pytest.raises(InputError, match="missing required field") as err:
        load("judgebench", str(tmp_path / "gh"))
    assert (err.value.line, err.value.field) == (1, "question")
    pair_file.write_text(good)
    (out_file,) = (tmp_path / "gh" / "outputs").iterdir()
    out_file.write_text(json.dumps(dict(json.loads(out_file.read_text()), judgments=[{"decision": "A>B"}])) + "\n")
    with pytest.raises(InputError, match="a list of two objects") as err:
        load("judgebench", str(tmp_path / "gh"))
    assert (err.value.line, err.value.field) == (1, "judgments")


def test_autoj_finds_upstream_data_test_and_outputs_folders(tmp_path):
    """Upstream Auto-J keeps the pairs in data/test/ and the verdicts in data/outputs/; pointing at
    data/ imports the same bank as the three files side by side."""
    import shutil

    from baer_fast.errors import InputError

    rows = [{"scenario": "code_generation", "label": lab, "prompt": f"p{i}", "response 1": f"x{i}",
             "response 2": f"y{i}"} for i, lab in enumerate([0, 1, 2])]
    files = {"test/testdata_pairwise.jsonl": rows,
             "outputs/pairwise_example_output.jsonl": [{"output": o} for o in (0, 0, 2)],
             "outputs/pairwise_exchange_example_output.jsonl": [{"output": o} for o in (1, 0, 2)]}
    for rel, recs in files.items():
        (tmp_path / "data" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "data" / rel).write_text("".join(json.dumps(r) + "\n" for r in recs))
        (tmp_path / "flat").mkdir(exist_ok=True)
        shutil.copy(tmp_path / "data" / rel, tmp_path / "flat")
    nested, flat = load("autoj", str(tmp_path / "data")), load("autoj", str(tmp_path / "flat"))
    assert [p.to_json() for p in nested.pairs] == [p.to_json() for p in flat.pairs]
    assert [s.experts for s in nested.banks["autoj-13b"]] == [s.experts for s in flat.banks["autoj-13b"]]
    # the exchange file is coded by displayed position: 1 there says the original response 1 won
    assert [s.experts["autoj-13b"] for s in flat.banks["autoj-13b"]] == [[1.0, 1.0], [1.0, 0.0], [0.5, 0.5]]

    shutil.copytree(tmp_path / "data" / "outputs", tmp_path / "data" / "old_outputs")
    with pytest.raises(InputError, match=r"found 2:\n  old_outputs/pairwise_example_output.jsonl\n  outputs/"):
        load("autoj", str(tmp_path / "data"))


def test_judge_output_importers_locate_malformed_records(tmp_path):
    """A record missing a field or holding the wrong shape in LLMBar, Auto-J or PandaLM files is a
    located error (file, record, field), not a KeyError or TypeError traceback."""
    import gzip
    import shutil

    from baer_fast.commands.demo import sample_dir

    sub = tmp_path / "llmbar" / "Natural"
    shutil.copytree(sample_dir(), sub)
    items = json.loads((sub / "dataset.json").read_text())
    del items[1]["output_2"]
    (sub / "dataset.json").write_text(json.dumps(items))
    with pytest.raises(InputError, match="missing required field") as err:
        load("llmbar", str(sub))
    assert (err.value.line, err.value.field) == (2, "output_2")
    items[1]["output_2"] = "restored"
    (sub / "dataset.json").write_text(json.dumps(items))
    result = sub / "evaluators" / "LLaMA2" / "Vanilla" / "result.json.gz"
    runs = json.loads(gzip.decompress(result.read_bytes()))
    runs[3]["results"] = []
    result.write_bytes(gzip.compress(json.dumps(runs).encode()))
    with pytest.raises(InputError, match="non-empty list of result objects") as err:
        load("llmbar", str(sub))
    assert (err.value.path, err.value.line, err.value.field) == (str(result), 4, "results")

    (tmp_path / "autoj").mkdir()
    rows = [{"scenario": "chat", "label": 0, "prompt": "p", "response 1": "x", "response 2": "y"},
            {"label": 1, "prompt": "p", "response 1": "x", "response 2": "y"}]
    write_jsonl(tmp_path / "autoj" / "testdata_pairwise.jsonl", rows)
    for name in ("pairwise_example_output.jsonl", "pairwise_exchange_example_output.jsonl"):
        write_jsonl(tmp_path / "autoj" / name, [{"output": 0}] * 2)
    with pytest.raises(InputError, match="missing required field") as err:
        load("autoj", str(tmp_path / "autoj"))
    assert (err.value.line, err.value.field) == (2, "scenario")

    (tmp_path / "pandalm").mkdir()
    test = [{"idx": 0, "instruction": "i", "input": "", "response1": "a", "response2": "b",
             "annotator1": 1, "annotator2": 1, "annotator3": "1"}]
    (tmp_path / "pandalm" / "testset-v1.json").write_text(json.dumps(test))
    for name in ("gpt-3.5-turbo-testset-v1.json", "pandalm-7b-testset-v1.json"):
        (tmp_path / "pandalm" / name).write_text("[]")
    with pytest.raises(InputError, match="expected int, got str") as err:
        load("pandalm", str(tmp_path / "pandalm"))
    assert (err.value.line, err.value.field) == (1, "annotator3")


def test_hh_rlhf_checkout_root_skips_red_team_transcripts(tmp_path):
    """A checkout's root: the preference folders are imported, red-team-attempts/ (one JSON list of
    attack transcripts, no chosen/rejected) is skipped and said so; pointed at directly it is read."""
    from baer_fast.errors import InputError

    def hh(h, c, r):
        return {"chosen": f"\n\nHuman: {h}\n\nAssistant: {c}", "rejected": f"\n\nHuman: {h}\n\nAssistant: {r}"}

    for folder, recs in (("helpful-base", [hh("hi", "hello", "go away"), hh("2+2?", "4", "5")]),
                         ("harmless-base", [hh("how to pick a lock?", "I can't help", "Sure")])):
        (tmp_path / folder).mkdir()
        with gzip.open(tmp_path / folder / "test.jsonl.gz", "wt") as fh:
            fh.writelines(json.dumps(r) + "\n" for r in recs)
    (tmp_path / "red-team-attempts").mkdir()
    with gzip.open(tmp_path / "red-team-attempts" / "red_team_attempts.jsonl.gz", "wt") as fh:
        fh.write('[\n  {"transcript": "\\n\\nHuman: hi\\n\\nAssistant: yo", "rating": 0}\n]\n')
    got = load("hh-rlhf", str(tmp_path))
    assert Counter(p.category for p in got.pairs) == {"helpful": 2, "harmless": 1}
    assert "skipped 1 file(s) of red-team-attempts/" in got.notes[0]
    with pytest.raises(InputError, match="red_team_attempts.jsonl.gz:1: malformed JSON"):
        load("hh-rlhf", str(tmp_path / "red-team-attempts"))


def test_rewardbench_snapshot_reads_the_filtered_split(tmp_path):
    """A hub snapshot holds data/filtered-* and data/raw-* (a superset with the same ids): the
    folder imports the filtered split and says what it skipped; raw alone is read as given."""
    extra = dict(REWARDBENCH[0], id=99999, subset="alpacaeval-hard")
    (tmp_path / "snap" / "data").mkdir(parents=True)
    write_jsonl(tmp_path / "snap" / "data" / "filtered-00000-of-00001.jsonl", REWARDBENCH)
    write_jsonl(tmp_path / "snap" / "data" / "raw-00000-of-00001.jsonl", REWARDBENCH + [extra])
    (tmp_path / "snap" / "raw").mkdir()          # the sources' own files, in their own layouts
    write_jsonl(tmp_path / "snap" / "raw" / "refusals_dangerous.jsonl", [{"prompt": "p", "completion": "c"}])
    got = load("rewardbench", str(tmp_path / "snap"))
    assert [p.id for p in got.pairs] == [f"rewardbench-{r['id']}" for r in REWARDBENCH]
    assert "skipped data/raw-00000-of-00001.jsonl, raw/refusals_dangerous.jsonl" in got.notes[0]
    (tmp_path / "snap" / "raw" / "refusals_dangerous.jsonl").unlink()
    (tmp_path / "snap" / "data" / "filtered-00000-of-00001.jsonl").unlink()
    got = load("rewardbench", str(tmp_path / "snap"))
    assert len(got.pairs) == len(REWARDBENCH) + 1 and "skipped" not in got.notes[0]


def test_mtbench_human_drops_gpt4_pair_verdicts(tmp_path):
    """The hub snapshot holds a human split and a gpt4_pair split with the same columns; GPT-4's
    verdicts are not labels: they are dropped and counted, and the human votes are kept."""
    (tmp_path / "data").mkdir()
    write_jsonl(tmp_path / "data" / "human-00000-of-00001.jsonl", MTBENCH)
    write_jsonl(tmp_path / "data" / "gpt4_pair-00000-of-00001.jsonl", [dict(r, judge="gpt4_pair") for r in MTBENCH])
    got = load("mtbench-human", str(tmp_path))
    assert len(got.pairs) == len(MTBENCH) and {p.meta["judge"] for p in got.pairs} == {"expert_0", "author_3"}
    assert got.dropped == {"a model's verdict (judge gpt4_pair), not a human label": 3}


def test_ultrafeedback_hub_snapshot_one_file_per_source(tmp_path):
    """openbmb/UltraFeedback keeps one id-less file per source (evol_instruct.jsonl, flan.jsonl,
    ...): line numbers repeat across files, so the file stem is part of the id."""
    for name in ("evol_instruct", "flan"):
        write_jsonl(tmp_path / f"{name}.jsonl", [dict(r, source=name) for r in ULTRAFEEDBACK])
    got = load("ultrafeedback", str(tmp_path))
    assert [p.id for p in got.pairs] == [f"ultrafeedback-{n}-{i:06d}" for n in ("evol_instruct", "flan") for i in (1, 4)]
    assert [p.subset for p in got.pairs] == ["evol_instruct"] * 2 + ["flan"] * 2
    one = load("ultrafeedback", str(tmp_path / "flan.jsonl")).pairs
    assert [p.id for p in one] == [p.id for p in got.pairs[2:]]       # a file alone keeps its ids


def _binarized(pid: str, prompt: str, chosen: str, rejected: str, sc: float, sr: float) -> dict:
    msgs = lambda reply: [{"role": "user", "content": prompt}, {"role": "assistant", "content": reply}]
    return {"prompt": prompt, "prompt_id": pid, "chosen": msgs(chosen), "rejected": msgs(rejected),
            "messages": msgs(chosen), "score_chosen": sc, "score_rejected": sr}


def test_ultrafeedback_binarized_snapshot_reads_the_prefs_splits(tmp_path):
    """HuggingFaceH4/ultrafeedback_binarized: chosen/rejected message lists keep the copy's own
    pair; equal scores are dropped; the sft/gen splits (the same prompts) are skipped beside prefs."""
    rows = [_binarized("p1", "Name a colour.", "Blue.", "Seven.", 9.0, 1.0),
            _binarized("p2", "Say yes.", "yes", "no", 5.0, 5.0),
            _binarized("p3", "Count to two.", "1 2", "2 1", 8.0, 3.5)]
    (tmp_path / "data").mkdir()
    for split in ("train_prefs", "train_sft", "test_gen"):
        write_jsonl(tmp_path / "data" / f"{split}-00000-of-00001.jsonl", rows)
    got = load("ultrafeedback", str(tmp_path))
    assert [p.id for p in got.pairs] == ["ultrafeedback-p1", "ultrafeedback-p3"]
    first = got.pairs[0]
    side = "a" if a_is_chosen(first.id) else "b"
    assert first.question == "Name a colour." and getattr(first, f"response_{side}") == "Blue."
    assert first.label == side and first.meta[f"rating_{side}"] == 9.0
    note = got.notes[0]
    assert "ultrafeedback (binarized)" in note and got.dropped == {"chosen and rejected rated equal": 1}
    assert "skipped test_gen-00000-of-00001.jsonl, train_sft-00000-of-00001.jsonl" in note
    sft = load("ultrafeedback", str(tmp_path / "data" / "train_sft-00000-of-00001.jsonl"))
    assert len(sft.pairs) == 2 and "skipped" not in sft.notes[0]     # pointed at directly, it is read
    bad = dict(rows[0], chosen=[{"role": "user", "content": "Name a colour."}])
    write_jsonl(tmp_path / "bad.jsonl", [bad])
    with pytest.raises(InputError, match="no response to judge") as err:
        load("ultrafeedback", str(tmp_path / "bad.jsonl"))
    assert (err.value.line, err.value.field) == (1, "chosen")


def test_arena_kaggle_55k_csv_turn_lists_winner_columns_and_test_split(tmp_path, capsys):
    """lmsys-arena-human-preference-55k train.csv: per-turn JSON lists in text cells, one-hot
    winner columns; a null turn is dropped and counted; test.csv (no winners) gives unlabelled pairs."""
    import csv as csv_mod

    head = ["id", "model_a", "model_b", "prompt", "response_a", "response_b",
            "winner_model_a", "winner_model_b", "winner_tie"]
    rows = [[30192, "gpt-4", "gpt-3.5-turbo", json.dumps(["Is it good?", "And now?"]),
             json.dumps(["yes", "still yes"]), json.dumps(["no", "still no"]), 1, 0, 0],
            [53567, "koala-13b", "gpt-4", json.dumps(["Name a prime"]), json.dumps(["7"]), json.dumps(["11"]), 0, 0, 1],
            [65089, "llama-2", "vicuna", json.dumps(["Hi"]), json.dumps([None]), json.dumps(["Hello"]), 0, 1, 0],
            [96401, "gpt-4", "claude-2", json.dumps(["Say \"hi\",\nplease"]), json.dumps(["hi"]), json.dumps(["Hi!"]), 0, 1, 0]]
    with open(tmp_path / "train.csv", "w", newline="", encoding="utf-8") as f:
        w = csv_mod.writer(f)
        w.writerow(head)
        w.writerows(rows)
    got = load("arena", str(tmp_path / "train.csv"))
    assert [(p.id, p.label) for p in got.pairs] == [("arena-30192", "a"), ("arena-53567", "tie"), ("arena-96401", "b")]
    first, tie, quoted = got.pairs
    assert first.question == "Is it good?" and first.meta["diverged"] and first.meta["model_b"] == "gpt-3.5-turbo"
    assert first.response_a == "yes\n\nUser: And now?\n\nAssistant: still yes"
    assert tie.meta["tie_kind"] == "tie" and quoted.question == 'Say "hi",\nplease'
    assert got.dropped == {"a turn is null (no answer)": 1}
    with open(tmp_path / "test.csv", "w", newline="", encoding="utf-8") as f:
        csv_mod.writer(f).writerows([head[:6], rows[0][:6]])
    (unlabelled,) = load("arena", str(tmp_path / "test.csv")).pairs
    assert unlabelled.label is None and unlabelled.response_b.startswith("no")
    bad = [rows[0][:6] + [1, 1, 0], rows[1][:4] + ["not json", rows[1][5], 0, 0, 1], rows[1]]
    with open(tmp_path / "bad.csv", "w", newline="", encoding="utf-8") as f:
        csv_mod.writer(f).writerows([head, *bad])
    with pytest.raises(InputError, match="exactly one of winner_model_a") as err:
        load("arena", str(tmp_path / "bad.csv"))
    assert err.value.line == 2 and err.value.field == "winner_model_a"
    rc, out, cap = _import(["arena", tmp_path / "bad.csv", "--on-error", "skip"], tmp_path, capsys)
    assert rc == 0 and [p.id for p in read_pairs(str(out / "pairs.jsonl"))] == ["arena-53567"]
    rej = [json.loads(line) for line in open(out / "pairs.jsonl.rejects.jsonl", encoding="utf-8")]
    assert [(r["line"], r["field"]) for r in rej] == [(2, "winner_model_a"), (3, "response_a")]
    cut = [[1, "m", "n", json.dumps(["cut \ud83d"]), json.dumps(["x"]), json.dumps(["y"]), 1, 0, 0]]
    with open(tmp_path / "cut.csv", "w", newline="", encoding="utf-8") as f:   # json.dumps escapes the half emoji
        csv_mod.writer(f).writerows([head, *cut])
    with pytest.raises(InputError, match="unpaired surrogate") as err:
        load("arena", str(tmp_path / "cut.csv"))
    assert (err.value.line, err.value.field) == (2, "prompt[0]")


def test_import_names_signals_left_by_an_earlier_import(sources, tmp_path, capsys, caplog):
    """A folder that already holds another import's signals files keeps them (nothing of the
    user's is deleted), but the import says they do not belong to the new pairs.jsonl."""
    src, args = sources["table"]
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "signals.old-bank.jsonl").write_text("{}\n", encoding="utf-8")
    with caplog.at_level("WARNING", logger="baer_fast"):
        rc, out, _ = _import(["table", src, *args], tmp_path, capsys)
    assert rc == 0 and (out / "signals.old-bank.jsonl").exists()
    assert "also holds signals.old-bank.jsonl from an earlier import" in caplog.text
    caplog.clear()
    (out / "signals.old-bank.jsonl").unlink()
    with caplog.at_level("WARNING", logger="baer_fast"):
        assert _import(["table", src, *args], tmp_path, capsys)[0] == 0
    assert "earlier import" not in caplog.text
    assert "replaced" not in caplog.text                     # the same import again: the same bytes, no word
    (out / "pairs.jsonl").write_text("{}\n", encoding="utf-8")  # another import's pairs
    caplog.clear()
    with caplog.at_level("WARNING", logger="baer_fast"):
        assert _import(["table", src, *args], tmp_path, capsys)[0] == 0
    assert "replaced pairs.jsonl in" in caplog.text


def test_a_failed_import_leaves_no_empty_folder(tmp_path, capsys):
    from baer_fast.cli import main
    out = tmp_path / "new"
    assert main(["import", "llmbar", str(tmp_path / "missing"), "--out", str(out)]) == 2
    assert not out.exists()
    out.mkdir()                                              # a folder the user made stays
    assert main(["import", "llmbar", str(tmp_path / "missing"), "--out", str(out)]) == 2
    assert out.exists()


def test_rewardbench_2_rows_give_one_pair_per_chosen_and_rejected(tmp_path):
    """allenai/reward-bench-2: lists of correct and incorrect completions per prompt; each
    combination is a pair, grouped by meta.prompt_id; a row is kept or rejected whole."""
    rows = [{"id": "f1", "prompt": "Capital of Peru?", "chosen": ["Lima."], "rejected": ["Cusco.", "Quito.", "Bogota."],
             "num_correct": 1, "num_rejected": 3, "total_completions": 4, "models": ["m"] * 4, "subset": "Factuality"},
            {"id": "t7", "prompt": "Name an even prime or odd one", "chosen": ["2", "3"], "rejected": ["4"],
             "num_correct": 2, "num_rejected": 1, "total_completions": 3, "models": ["m"] * 3, "subset": "Ties"},
            {"id": "b1", "prompt": "x", "chosen": [], "rejected": ["y"], "subset": "Math"}]
    (tmp_path / "data").mkdir()
    write_jsonl(tmp_path / "data" / "test-00000-of-00001.jsonl", rows)
    with pytest.raises(InputError, match="non-empty list of completion strings") as err:
        load("rewardbench", str(tmp_path))
    assert (err.value.line, err.value.field) == (3, "chosen")
    from baer_fast.io.rejects import Rejects
    got = load("rewardbench", str(tmp_path), rejects=Rejects())
    assert [p.id for p in got.pairs] == ["rewardbench-f1-c0-r0", "rewardbench-f1-c0-r1", "rewardbench-f1-c0-r2",
                                         "rewardbench-t7-c0-r0", "rewardbench-t7-c1-r0"]
    assert [p.meta["prompt_id"] for p in got.pairs] == ["f1"] * 3 + ["t7"] * 2
    from baer_fast.io.splits import roles
    assert len(set(roles(got.pairs[:3]))) == 1 and len(set(roles(got.pairs[3:]))) == 1   # one role per prompt
    for p in got.pairs:
        side = "a" if a_is_chosen(p.id) else "b"
        assert p.label == side and getattr(p, f"response_{side}") in ("Lima.", "2", "3")
    assert got.pairs[0].subset == "Factuality" and got.pairs[0].category is None
    assert "2 RewardBench 2 prompts gave 5 pairs" in got.notes[1] and len(got.notes) == 2
