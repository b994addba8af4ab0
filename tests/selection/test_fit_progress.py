"""`fit` says how far its nested CV has got: a 50k-row fit ran 16 minutes without a line on stderr."""
import logging

from baer_fast.selection import fit as fit_module
from baer_fast.selection.fit import fit_condition
from tests.fixtures.data import make_signals


def test_nested_cv_logs_its_folds(caplog, capsys, monkeypatch):
    monkeypatch.setattr(fit_module, "PROGRESS_EVERY_S", 0.0)      # a line per fold, from the first
    with caplog.at_level(logging.INFO, logger="baer_fast"):
        art = fit_condition(make_signals(200, seed=3), condition="c")
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("fit: nested CV on")]
    assert len(lines) >= 2 and lines[-1].split(": ")[2].startswith("60/60 folds (100%)"), lines
    assert lines[-1].endswith(", route"), lines       # the candidate being cross-validated
    assert any("refitting every head" in r.getMessage() for r in caplog.records)
    assert art["head"]


def test_progress_leaves_the_artifact_alone(monkeypatch):
    recs = make_signals(200, seed=4)
    quiet = fit_condition(recs, condition="c")
    monkeypatch.setattr(fit_module, "PROGRESS_EVERY_S", 0.0)
    assert fit_condition(recs, condition="c") == quiet


def test_a_fit_of_seconds_prints_no_progress(caplog, capsys):
    # the demo fits six heads in seconds: no fold counts, no "refitting" line between its results
    with caplog.at_level(logging.INFO, logger="baer_fast"):
        fit_condition(make_signals(200, seed=3), condition="c")
    assert "nested CV on" not in capsys.readouterr().err
    assert not [r for r in caplog.records if "refitting" in r.getMessage()]
