"""The budget search's nested CV reports its folds once it has run longer than a progress period, not only
for per-subset spaces (a 50k-row search ran over 20 minutes without a line)."""
import logging

import pytest

from baer_fast.selection import budget
from baer_fast.selection.budget import plan_with_nested
from tests.fixtures.data import make_signals


@pytest.mark.parametrize("period, shown", [(0.0, True), (1e9, False)])
def test_nested_search_reports_folds_when_it_runs_long(monkeypatch, capsys, period, shown):
    monkeypatch.setattr(budget, "PROGRESS_EVERY_S", period)     # 0: "long" for a quick test
    logging.getLogger("baer_fast").setLevel(logging.INFO)
    try:
        plan_with_nested(make_signals(200, seed=5), "0.5")
    finally:
        logging.getLogger("baer_fast").setLevel(logging.NOTSET)
    err = capsys.readouterr().err
    last = [ln for ln in err.splitlines() if ln.startswith("budget search (nested CV): ")][-1:]
    assert bool(last and "folds (100%)" in last[0]) == shown, err
