"""Issue #6 acceptance: the engine's equality with the naive path holds with the Triton readout.

On CPU the kernel runs under the Triton interpreter (conftest.py sets TRITON_INTERPRET=1);
on a GPU machine gpu_check.sh runs this file compiled.
"""
import pytest

from baer_fast.runtime.config import EngineConfig
from baer_fast.runtime.open import load_judge
from baer_fast.bank.runner import RunReport, run_experts
from tests.fixtures.tiny_models import build_model_dir, make_pairs



@pytest.fixture(scope="module", params=["qwen3", "llama"])
def loaded(request, tmp_path_factory):
    path = build_model_dir(str(tmp_path_factory.mktemp(request.param)), arch=request.param, seed=2)
    return load_judge(path, dtype="float32")


def test_prefix_engine_with_triton_readout_equals_naive_torch(loaded, monkeypatch):
    from baer_fast.kernels import dispatch
    calls = []
    kernel = dispatch.choice_logits
    monkeypatch.setattr(dispatch, "choice_logits", lambda *a, **k: calls.append(1) or kernel(*a, **k))
    pairs = make_pairs(4, seed=5)
    naive_report = RunReport()
    naive = run_experts(loaded, pairs, naive=True, report=naive_report, config=EngineConfig(kernels="torch"))
    shared = run_experts(loaded, pairs, config=EngineConfig(kernels="triton"),
                         derived_params=naive_report.derived_params)
    worst = max(abs(u - v) for a, b in zip(shared, naive) for k in a.experts
                for u, v in zip(a.experts[k], b.experts[k], strict=True))
    from baer_fast import protocols
    from tests.fixtures.tolerances import naive_run_error, paths_tol
    assert worst <= paths_tol(naive_run_error(loaded, pairs, protocols.SINGLE_PASS,
                                              derived_params=naive_report.derived_params))
    assert calls                    # the Triton kernel really read the verdicts
