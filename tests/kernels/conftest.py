"""Kernel tests: the Triton kernels run on CPU through Triton's interpreter, on GPU compiled.

Triton decides interpret-or-compile when a kernel is defined (`@triton.jit`) and consults
TRITON_INTERPRET again on first launch, so on a machine without CUDA this file sets
TRITON_INTERPRET=1 at import, before the kernel modules are imported, and leaves it set for
the rest of the pytest process. Tests that need it unset (explicit "triton" must raise)
use `monkeypatch.delenv`. With CUDA present nothing is set: `benchmarks/gpu_check.sh`
runs these same tests compiled, on CUDA tensors (`device` fixture).
"""
from __future__ import annotations

import importlib
import os
import sys

import pytest
import torch

if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"

_KERNEL_MODULES = ("baer_fast.kernels.choice_logits", "baer_fast.kernels.evidence_features",
                   "baer_fast.kernels.decode_attention",
                   "baer_fast.kernels.dispatch")


def _redefine_kernels_if_compiled() -> None:
    """Another test imported the kernels before this file ran: define them again, interpreted."""
    mod = sys.modules.get(_KERNEL_MODULES[0])
    kernel = getattr(mod, "_choice_logits_kernel", None)
    if kernel is None or type(kernel).__name__ == "InterpretedFunction":
        return
    for name in _KERNEL_MODULES:
        if name in sys.modules:
            importlib.reload(sys.modules[name])


if os.environ.get("TRITON_INTERPRET") == "1":
    _redefine_kernels_if_compiled()


@pytest.fixture(scope="session")
def device() -> torch.device:
    """Where kernel inputs live: CUDA when kernels compile, CPU under the interpreter."""
    interpreted = os.environ.get("TRITON_INTERPRET") == "1"
    return torch.device("cuda" if torch.cuda.is_available() and not interpreted else "cpu")
