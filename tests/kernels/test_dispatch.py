"""Dispatch: explicit requests fail loudly, "auto" falls back to torch quietly and says so once."""
from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from baer_fast.errors import BaerError
from baer_fast.kernels import dispatch
from baer_fast.kernels.choice_logits import choice_logits_ref
from baer_fast.kernels.evidence_features import evidence_features_ref

no_gpu = pytest.mark.skipif(dispatch.HAS_TRITON_GPU, reason="checks the no-GPU behaviour")


@no_gpu
def test_explicit_triton_without_gpu_raises(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(dispatch.KernelUnavailableError, match="needs a CUDA device") as err:
        dispatch.resolve_kernels("triton")
    assert isinstance(err.value, BaerError)
    with pytest.raises(dispatch.KernelUnavailableError):
        dispatch.read_choices(torch.randn(2, 4), torch.randn(9, 4), torch.tensor([1, 2]),
                              kernels="triton")


@no_gpu
def test_explicit_triton_is_allowed_under_the_interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert dispatch.resolve_kernels("triton", "cpu") == "triton"


@no_gpu
def test_auto_picks_torch_on_cpu_and_logs_once(caplog):
    dispatch._announce.cache_clear()
    with caplog.at_level(logging.INFO, logger=dispatch.__name__):
        assert dispatch.resolve_kernels("auto") == "torch"
        assert dispatch.resolve_kernels("auto", "cpu") == "torch"
        dispatch.read_choices(torch.randn(2, 4), torch.randn(9, 4), torch.tensor([1, 2]))
    lines = [r for r in caplog.records if r.name == dispatch.__name__]
    assert len(lines) == 1 and "torch" in lines[0].getMessage()


@pytest.mark.gpu
@pytest.mark.skipif(not dispatch.HAS_TRITON_GPU, reason="needs a CUDA device with Triton")
def test_auto_picks_triton_on_gpu_and_logs_once(caplog):
    dispatch._announce.cache_clear()
    with caplog.at_level(logging.INFO, logger=dispatch.__name__):
        assert dispatch.resolve_kernels("auto") == "triton"
        assert dispatch.resolve_kernels("auto", "cuda:0") == "triton"
        assert dispatch.resolve_kernels("auto", "cpu") == "torch"     # CPU tensors stay on torch
    lines = [r.getMessage() for r in caplog.records if r.name == dispatch.__name__]
    assert len(lines) == 2 and "triton" in lines[0]                 # one line per decision


def test_auto_never_picks_triton_for_cpu_tensors(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")          # the interpreter is never automatic
    assert dispatch.resolve_kernels("auto", torch.device("cpu")) == "torch"
    assert dispatch.resolve_kernels("torch", "cuda") == "torch"


def test_unknown_kind_is_a_clear_error():
    with pytest.raises(dispatch.KernelUnavailableError, match="auto, triton, torch"):
        dispatch.resolve_kernels("cuda")


def test_wrappers_route_to_the_right_implementation(device):
    """The same inputs through torch and triton paths of both public wrappers agree."""
    gen = torch.Generator().manual_seed(0)
    hidden, weight = torch.randn(5, 33, generator=gen), torch.randn(70, 33, generator=gen)
    ids = torch.tensor([3, 69, 0])
    want = choice_logits_ref(hidden, weight, ids)
    assert torch.equal(dispatch.read_choices(hidden, weight, ids, kernels="torch"), want)
    got = dispatch.read_choices(hidden.to(device), weight.to(device), ids.to(device),
                                kernels="triton")
    # two fp32 dot products of 33 terms, each off by at most 33 eps32 sum|h w| (then a log-softmax
    # over 3 labels: at most twice that)
    from tests.fixtures.tolerances import fp32_tol, fp64_tol
    scale = float((hidden.abs() @ weight[ids].abs().T).max())
    torch.testing.assert_close(got.cpu(), want, rtol=0, atol=2 * 2 * fp32_tol(33, scale)
                               + fp32_tol(8, 1 + float(want.abs().max())))   # + the log-softmax's own rounding
    u = torch.rand(6, 3, 4, generator=gen, dtype=torch.float64)
    ref = evidence_features_ref(u)
    for kernels in ("torch", "triton"):
        out = dispatch.compute_evidence(u.to(device), kernels=kernels)
        # float64, a few dozen operations per value (mean, clip, logit, divide), scale max |zt|
        torch.testing.assert_close(out.zt.cpu(), ref.zt, rtol=0, atol=fp64_tol(64, 1 + float(ref.zt.abs().max())))


def test_import_and_torch_path_without_triton(tmp_path):
    """With Triton unimportable the modules still import, "auto" uses torch and an explicit
    "triton" names what is missing (fresh interpreter: Triton is already loaded here)."""
    code = textwrap.dedent("""
        import sys
        sys.modules["triton"] = None                      # import triton -> ImportError
        import torch
        from baer_fast.kernels import dispatch
        from baer_fast.kernels.evidence_features import evidence_features
        out = dispatch.read_choices(torch.randn(2, 4), torch.randn(9, 4), torch.tensor([1, 2]))
        assert out.shape == (2, 2) and not dispatch.HAS_TRITON_GPU
        try:
            evidence_features(torch.rand(2, 3, 1, dtype=torch.float64))
        except dispatch.KernelUnavailableError as err:
            print("raised:", err)
    """)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["CUDA_VISIBLE_DEVICES"] = ""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=120)      # cwd: no checkout shadowing the install
    assert proc.returncode == 0, proc.stderr
    assert "raised: Triton is not importable here" in proc.stdout
