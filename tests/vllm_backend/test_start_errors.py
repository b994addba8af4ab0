"""vLLM backend start-up failures are one line (main venv, no vLLM: a stand-in `vllm` module and
fake data-parallel ranks): bad options name their flag, an engine that cannot start names the
model and the cause's first line, a rank's failure is its exception's gist (traceback: debug log)."""
import logging
import os
import sys
from types import SimpleNamespace

import pytest

from baer_fast.cli import main
from baer_fast.errors import BaerError, InputError
from baer_fast.io.records import Pair, write_pairs
from baer_fast.runtime.vllm.backend import VllmOptions, load_vllm
from baer_fast.runtime.vllm.dp import DataParallelEngine


def test_a_parallel_size_below_one_names_its_flag(tmp_path, qwen_dir, capsys):
    for kw, flag in (({"tensor_parallel_size": 0}, "--tensor-parallel-size"),
                     ({"data_parallel_size": 0}, "--data-parallel-size")):
        with pytest.raises(InputError, match=f"field '{flag}': must be at least 1") as e:
            VllmOptions(**kw)
        assert isinstance(e.value, ValueError)
    pairs = tmp_path / "pairs.jsonl"
    write_pairs(str(pairs), [Pair("x", "q", "a", "b")])
    rc = main(["experts", "--model", qwen_dir, "--input", str(pairs), "--out", str(tmp_path / "s.jsonl"),
               "--backend", "vllm", "--tensor-parallel-size", "0", "-q"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and "Traceback" not in "".join(err) and "field '--tensor-parallel-size'" in err[-1], err


def test_an_engine_that_cannot_start_names_the_model_and_the_cause(qwen_dir, monkeypatch):
    def refuse(**kwargs):
        raise RuntimeError("Engine core initialization failed. See root cause above.\nFailed core proc(s): {}")
    monkeypatch.setitem(sys.modules, "vllm", SimpleNamespace(LLM=refuse))
    with pytest.raises(BaerError) as e:
        load_vllm(qwen_dir, VllmOptions(dtype="float32"))
    msg = str(e.value)
    assert "\n" not in msg and f"model '{os.path.basename(os.path.normpath(qwen_dir))}'" in msg
    assert "RuntimeError: Engine core initialization failed. See root cause above." in msg
    assert isinstance(e.value.__cause__, RuntimeError)


def failing_factory(path, options):
    """Runs in the spawned rank: a multi-line error from deep inside, as vLLM's are."""
    def deep():
        raise ValueError("model type `frobnicator` is not supported\n\nYou can update vLLM with ...")
    deep()


def baer_failing_factory(path, options):
    raise BaerError("vLLM could not start an engine for model 'm' (RuntimeError: boom)")


def test_a_rank_failure_is_its_gist_and_the_traceback_goes_to_the_debug_log(qwen_dir, caplog):
    caplog.set_level(logging.DEBUG, logger="baer_fast")
    with pytest.raises(BaerError) as e:
        DataParallelEngine(qwen_dir, VllmOptions(data_parallel_size=1), factory=failing_factory)
    assert str(e.value) == ("vLLM data-parallel rank 0 failed to start its engine: ValueError: model type "
                            "`frobnicator` is not supported")
    assert "Traceback" in caplog.text and "in deep" in caplog.text
    with pytest.raises(BaerError) as e:
        DataParallelEngine(qwen_dir, VllmOptions(data_parallel_size=1), factory=baer_failing_factory)
    assert str(e.value) == ("vLLM data-parallel rank 0 failed to start its engine: vLLM could not start an "
                            "engine for model 'm' (RuntimeError: boom)")
