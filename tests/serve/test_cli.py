"""`baer-fast serve` refuses bad settings with exit 2 and one line, before loading a model."""
import pytest

from baer_fast.cli import main


@pytest.mark.parametrize("argv, needle", [
    (["--model", "/nonexistent/model"], "model directory not found"),
    (["--model", "MODEL", "--api-key-env", "BAER_TEST_UNSET_VAR"], "BAER_TEST_UNSET_VAR is unset"),
    (["--model", "MODEL", "--max-queue", "0"], "max_queue must be at least 1"),
    (["--model", "MODEL", "--tensor-parallel-size", "2"], "only apply to --backend vllm"),
])
def test_bad_settings_exit_2(argv, needle, judge_dir, capsys, monkeypatch):
    monkeypatch.delenv("BAER_TEST_UNSET_VAR", raising=False)
    assert main(["serve", *[judge_dir if a == "MODEL" else a for a in argv]]) == 2
    assert needle in capsys.readouterr().err
