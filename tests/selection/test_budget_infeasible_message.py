"""`frontier` with its default budget on a small bank says which --budget it was and what would fit."""
from baer_fast.cli import main
from baer_fast.io.records import write_signals
from tests.fixtures.data import make_signals


def test_default_budget_below_every_expert_names_the_least_that_fits(tmp_path, capsys):
    sig = tmp_path / "s.jsonl"
    write_signals(str(sig), make_signals(120, experts=("e1", "e2", "e3"), seed=2))
    assert main(["frontier", "--signals", str(sig)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: field '--budget': no expert subset fits"), err
    assert "--budget 0.33 allows 0.99 per pair of the full bank's 3" in err[0]
    assert "give --budget 0.34 or more" in err[0]
    assert main(["frontier", "--signals", str(sig), "--budget", "0.34"]) == 0
