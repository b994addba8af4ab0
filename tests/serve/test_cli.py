"""`baer-fast serve` refuses bad settings with exit 2 and one line, before loading a model."""
import pytest

from baer_fast.cli import main


@pytest.mark.parametrize("argv, needle", [
    (["--model", "/nonexistent/model"], "model directory not found"),
    (["--model", "MODEL", "--api-key-env", "BAER_TEST_UNSET_VAR"], "BAER_TEST_UNSET_VAR is unset"),
    (["--model", "MODEL", "--max-queue", "0"], "max_queue must be at least 1"),
    (["--model", "MODEL", "--body-timeout-s", "0"], "body_timeout_s must be above 0"),
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


def test_serve_decodes_with_the_head_budgets_and_takes_the_flags_it_lists(judge_dir, tmp_path, capsys, monkeypatch):
    """serve listed --max-new-tokens, --seed and --truncate but read none of them: a bad budget was served
    without a word, and over-long pairs were always cut. It now reads them as score --model does."""
    from baer_fast import artifact
    from baer_fast.serve import server

    art = artifact.default_artifact()
    art["experts"] = art["heads"]["default"]["experts"] = ["direct", "cot"]
    art["generation"] = {"cot": {"max_new_tokens": 6, "seed": 4}}
    head = tmp_path / "h.json"
    artifact.save(str(head), art)
    served = []
    monkeypatch.setattr(server, "serve", lambda judge, config: served.append(judge) or 0)
    assert main(["serve", "--model", judge_dir, "--head", str(head), "--max-new-tokens", "cot=abc"]) == 2
    assert "field '--max-new-tokens': 'abc' is not a whole number" in capsys.readouterr().err
    assert not served
    assert main(["serve", "--model", judge_dir, "--head", str(head)]) == 0
    assert served[-1].options.truncate is True             # the default: cut both sides alike, as Judge does
    assert (served[-1].options.generation.budget("cot"), served[-1].options.generation.seed) == (6, 4)
    assert main(["serve", "--model", judge_dir, "--head", str(head), "--max-new-tokens", "cot=3", "--seed", "5",
                 "--no-truncate"]) == 0
    assert served[-1].options.truncate is False
    assert served[-1].truncate_fix == "start serve without --no-truncate"    # its 422 names serve's flag
    assert (served[-1].options.generation.budget("cot"), served[-1].options.generation.seed) == (3, 5)
    assert main(["serve", "--model", judge_dir, "--truncate"]) == 2        # not a serve option: it always cut


def test_body_timeout_reaches_the_server_config(judge_dir, monkeypatch):
    from baer_fast.serve import server
    from baer_fast.serve.config import ServeConfig
    configs = []
    monkeypatch.setattr(server, "serve", lambda judge, config: configs.append(config) or 0)
    assert main(["serve", "--model", judge_dir]) == 0
    assert main(["serve", "--model", judge_dir, "--body-timeout-s", "7.5"]) == 0
    assert [c.body_timeout_s for c in configs] == [ServeConfig().body_timeout_s, 7.5]


def test_serve_help_promises_no_field_the_answers_lack(capsys):
    """--no-truncate's help said cut pairs were "marked meta.truncated in /v1/judge's runs", but the
    server answers only serve.schemas.RESULT_FIELDS: no runs, no meta."""
    main(["serve", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "(its request gets 422)" in text and "meta.truncated" not in text
