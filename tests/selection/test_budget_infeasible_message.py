"""A budget below every expert says which --budget it was and what would fit; frontier's default (1/3) fits one
expert of a bank of three equal ones, which 0.33 (the default before) did not."""
import pytest

from baer_fast.cli import main
from baer_fast.errors import InputError
from baer_fast.io.records import write_signals
from baer_fast.selection.costs import parse_budget
from tests.fixtures.data import make_signals


def test_budget_below_every_expert_names_the_least_that_fits(tmp_path, capsys):
    sig = tmp_path / "s.jsonl"
    write_signals(str(sig), make_signals(120, experts=("e1", "e2", "e3"), seed=2))
    assert main(["frontier", "--signals", str(sig), "--budget", "0.33"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: field '--budget': no expert subset fits"), err
    assert "--budget 0.33 allows 0.99 per pair of the full bank's 3" in err[0]
    assert "give --budget 0.34 or more" in err[0]
    assert main(["frontier", "--signals", str(sig), "--budget", "0.34"]) == 0
    capsys.readouterr()
    assert main(["frontier", "--signals", str(sig)]) == 0
    assert "* chosen at budget 1/3:" in capsys.readouterr().out


def test_a_budget_may_be_a_ratio():
    assert parse_budget("1/3") == ("fraction", 1 / 3) and parse_budget(" 2/4 ") == ("fraction", 0.5)
    for bad in ("1/0", "a/3", "4/3", "-1/3", "tokens=1/2", "1/3/4"):
        with pytest.raises(InputError, match="--budget"):
            parse_budget(bad)


def test_fit_cascade_by_default_has_a_cheap_stage_on_three_equal_experts(tmp_path):
    sig, head = tmp_path / "s.jsonl", tmp_path / "h.json"
    write_signals(str(sig), make_signals(200, experts=("e1", "e2", "e3"), seed=2))
    assert main(["-q", "fit", "--signals", str(sig), "--condition", "c", "--out", str(head), "--cascade"]) == 0
    from baer_fast import artifact
    c = artifact.load(str(head))["cascade"]
    assert c["cheap_budget"] == "1/3" and len(c["stage1_experts"]) == 1
