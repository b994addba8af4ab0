"""Too few labelled rows to fit is one located line (the signals file, field 'label') saying what was read."""
import logging
from dataclasses import replace

import pytest

from baer_fast.cli import main
from baer_fast.io.records import write_signals
from baer_fast.selection.fit import fit_condition
from tests.fixtures.data import make_signals


@pytest.mark.parametrize("command", ["fit", "frontier"])
@pytest.mark.parametrize("label,counts", [("tie", "0 labelled a/b, 60 tie, 0 unlabelled"),
                                          (None, "0 labelled a/b, 0 tie, 60 unlabelled")])
def test_no_fittable_label_names_the_file_and_the_counts(tmp_path, capsys, command, label, counts):
    sig = tmp_path / "s.jsonl"
    write_signals(str(sig), [replace(r, label=label) for r in make_signals(60, seed=1)])
    argv = [command, "--signals", str(sig)] + (["--condition", "c", "--out", str(tmp_path / "h.json")]
                                               if command == "fit" else [])
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {sig}: field 'label': only 0 labelled rows"), err
    assert counts in err[0]


@pytest.mark.parametrize("n, warned", [(8, True), (200, False)])
def test_a_fit_on_a_handful_of_rows_warns(caplog, n, warned):
    rows = make_signals(n, seed=1)
    rows = [replace(r, split=("selection", "calibration")[i % 2]) for i, r in enumerate(rows)]
    with caplog.at_level(logging.WARNING, logger="baer_fast"):
        assert fit_condition(rows, condition="c")["head"]
    assert any("labelled non-test rows; the nested CV's figures" in r.getMessage() for r in caplog.records) == warned
