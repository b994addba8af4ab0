"""What `import` reports: data left out is a warning (seen under -q), multi-turn pairs are counted
whether they share a conversation or differ before the final reply, and a failed import removes
every folder it made."""
from __future__ import annotations

from baer_fast.cli import main
from baer_fast.io.adapters import load

from tests.io.schemas import ARENA, MTBENCH, REWARDBENCH, write_jsonl


def test_records_left_out_are_a_warning_shown_under_quiet(tmp_path, capsys, caplog):
    rows = MTBENCH + [dict(MTBENCH[0], judge="gpt4_pair")] * 2
    src = write_jsonl(tmp_path / "mt.jsonl", rows)
    with caplog.at_level("WARNING", logger="baer_fast"):        # what -q shows
        assert main(["-q", "import", "mtbench-human", str(src), "--out", str(tmp_path / "out")]) == 0
    assert (f"mtbench-human: left out 2 record(s) of {src}: a model's verdict (judge gpt4_pair), "
            "not a human label") in caplog.text
    assert "3 pairs" not in caplog.text                          # the info summary stays quiet
    capsys.readouterr()


def test_turn_2_and_follow_ups_count_as_multi_turn(tmp_path):
    """MT-Bench's turn 2 and Arena's follow-ups differ before the final reply: their question is a
    string, their responses carry the later turns; they are multi-turn all the same."""
    got = load("mtbench-human", str(write_jsonl(tmp_path / "mt.jsonl", MTBENCH)))
    assert "mtbench-human: 3 pairs (label a 1, b 1, tie 1; 1 multi-turn, 1 of them differ before the final reply)" \
        in got.notes[0]
    got = load("arena", str(write_jsonl(tmp_path / "arena.jsonl", ARENA)))
    assert "1 multi-turn, 1 of them differ before the final reply" in got.notes[0]


def test_a_failed_import_removes_the_nested_folders_it_made(tmp_path, capsys):
    src = write_jsonl(tmp_path / "bad.jsonl", [dict(REWARDBENCH[0], chosen=1)])
    (tmp_path / "kept").mkdir()
    for out in (tmp_path / "deep" / "a" / "b", tmp_path / "kept" / "a" / "b"):
        assert main(["import", "rewardbench", str(src), "--out", str(out)]) == 2
    assert not (tmp_path / "deep").exists()
    assert (tmp_path / "kept").is_dir() and not (tmp_path / "kept" / "a").exists()
    out = tmp_path / "skip" / "a"
    assert main(["import", "rewardbench", str(src), "--out", str(out), "--on-error", "skip"]) == 2
    assert [p.name for p in out.iterdir()] == ["pairs.jsonl.rejects.jsonl"]      # kept: it holds the rejects
    capsys.readouterr()
