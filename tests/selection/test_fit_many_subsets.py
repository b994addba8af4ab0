"""A subset per pair (an id-like column) is refused in one located line instead of a fit that runs for
hours (2k unique subsets: over 5 minutes; 50k: tens of GB of router features)."""
from dataclasses import replace

import pytest

from baer_fast.cli import main
from baer_fast.io.records import write_signals
from baer_fast.selection import fit as fit_module
from tests.fixtures.data import make_signals


@pytest.mark.parametrize("command", ["fit", "frontier"])
def test_a_subset_per_pair_is_refused(tmp_path, capsys, monkeypatch, command):
    monkeypatch.setattr(fit_module, "MAX_GROUPS", 20)      # the cap is 256; a small file shows the rule
    sig = tmp_path / "s.jsonl"
    write_signals(str(sig), [replace(r, subset=f"s{i}") for i, r in enumerate(make_signals(80, seed=6))])
    argv = [command, "--signals", str(sig)] + (["--condition", "c", "--out", str(tmp_path / "h.json")]
                                               if command == "fit" else ["--budget", "0.5"])
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {sig}: field 'subset': ") and "at most 20" in err[0], err
    assert not (tmp_path / "h.json").exists()


def test_real_numbers_of_subsets_still_fit(monkeypatch):
    rows = [replace(r, subset=f"s{i % 10}") for i, r in enumerate(make_signals(120, seed=7))]
    assert fit_module.fit_condition(rows, condition="c")["feature_spec"]["categories"] == [f"s{i}" for i in range(10)]
