"""The budget search's nested CV reports its folds on many rows, not only for per-subset spaces."""
import logging

from baer_fast.selection import budget
from baer_fast.selection.budget import plan_with_nested
from tests.fixtures.data import make_signals


def test_nested_search_reports_folds_on_many_rows(monkeypatch, capsys):
    monkeypatch.setattr(budget, "PROGRESS_ROWS", 50)        # "many" for a quick test
    logging.getLogger("baer_fast").setLevel(logging.INFO)
    try:
        plan_with_nested(make_signals(200, seed=5), "0.5")
    finally:
        logging.getLogger("baer_fast").setLevel(logging.NOTSET)
    err = capsys.readouterr().err
    assert "budget search (nested CV):" in err and "folds" in err, err
