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


def test_kernels_and_experts_the_server_cannot_run_are_refused_before_the_model_loads(judge_dir, tmp_path, capsys,
                                                                                      monkeypatch):
    """They used to surface at the first request (triton on a CPU machine) or after the load (an imported
    bank's head)."""
    import baer_fast.runtime.open as opener
    from baer_fast import artifact
    from baer_fast.kernels import dispatch

    monkeypatch.setattr(opener, "open_engine", lambda *a, **k: pytest.fail("the model was loaded"))
    if not dispatch.HAS_TRITON_GPU:
        monkeypatch.delenv("TRITON_INTERPRET", raising=False)
        assert main(["serve", "--model", judge_dir, "--kernels", "triton"]) == 2
        assert "kernels='triton' needs a CUDA device" in capsys.readouterr().err
    art = artifact.default_artifact()
    art["experts"] = ["CoT"]
    head = tmp_path / "h.json"
    artifact.save(str(head), art)
    assert main(["serve", "--model", judge_dir, "--head", str(head)]) == 2
    assert "field 'experts': the head uses expert 'CoT'" in capsys.readouterr().err
