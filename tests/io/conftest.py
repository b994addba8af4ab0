"""Fixtures for the pair importers: small files written from each source's published record
layout (RewardBench filtered, UltraFeedback, FastChat MT-Bench human judgments, Chatbot Arena
conversations)."""
from __future__ import annotations

import pytest

from tests.io.schemas import ARENA, MTBENCH, REWARDBENCH, ULTRAFEEDBACK, write_jsonl


@pytest.fixture
def sources(tmp_path) -> dict:
    """FORMAT -> (SRC path, extra CLI args) for every importer with no data in ../shared/data."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rb = tmp_path / "rewardbench" / "filtered.parquet"
    rb.parent.mkdir()
    pq.write_table(pa.Table.from_pylist(REWARDBENCH), rb)
    table_csv = tmp_path / "mine.csv"
    table_csv.write_text("q,good,bad,grp\nPick a number,seven,eight,nums\nSay hi,hi,bye,greet\n"
                         "\"Two, words\",\"yes, both\",no,greet\n", encoding="utf-8")
    return {
        "rewardbench": (rb, []),
        "ultrafeedback": (write_jsonl(tmp_path / "uf.jsonl", ULTRAFEEDBACK), []),
        "mtbench-human": (write_jsonl(tmp_path / "mt.jsonl", MTBENCH), []),
        "arena": (write_jsonl(tmp_path / "arena.jsonl", ARENA), []),
        "table": (table_csv, ["--question-col", "q", "--chosen-col", "good", "--rejected-col", "bad",
                              "--subset-col", "grp"]),
    }
