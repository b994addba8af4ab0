"""Fixtures for the pair importers: small files written from each source's published record
layout (RewardBench filtered, UltraFeedback, FastChat MT-Bench human judgments, Chatbot Arena
conversations), the real files in ../shared/data, and one tiny judge model."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

_ROOT = Path(__file__).resolve().parents[2]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from tests.fixtures.data import shared  # noqa: E402,F401  (the tests here import it from this conftest)
from tests.io.schemas import ARENA, MTBENCH, REWARDBENCH, ULTRAFEEDBACK, write_jsonl  # noqa: E402



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


@pytest.fixture(scope="session")
def tiny_qwen(tmp_path_factory):
    from tests.fixtures.tiny_models import build_model_dir

    return build_model_dir(str(tmp_path_factory.mktemp("qwen3_io")), arch="qwen3")
