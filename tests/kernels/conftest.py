"""Kernel tests: the Triton kernels run on CPU through Triton's interpreter, on GPU compiled.

Triton decides interpret-or-compile when a kernel is defined (`@triton.jit`) and consults
TRITON_INTERPRET again on first launch, so on a machine without CUDA this file sets
TRITON_INTERPRET=1 at import, before the kernel modules are imported, and leaves it set for
the rest of the pytest process. Tests that need it unset (explicit "triton" must raise)
use `monkeypatch.delenv`. With CUDA present nothing is set: `benchmarks/gpu_check.sh`
runs these same tests compiled, on CUDA tensors (`device` fixture). Triton 3.6's interpreter
cannot run on numpy >= 2.4: there every test here is skipped, saying so.
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


def _interpreter_broken() -> str | None:
    """Triton 3.6's interpreter turns a tensor used as an index into int(array of shape (1,)), which numpy
    2.4 refuses ("only 0-dimensional arrays can be converted to Python scalars"): every kernel launch
    fails there. Triton 3.7 fixed it; the compiled (CUDA) path never had it. Both pairs are in the pins."""
    import numpy as np
    import triton
    ver = lambda v: tuple(int(x) for x in v.split("+")[0].split(".")[:2])
    if ver(triton.__version__) < (3, 7) and ver(np.__version__) >= (2, 4):
        return (f"triton {triton.__version__}'s interpreter cannot run on numpy {np.__version__} (fixed in "
                "triton 3.7); the compiled kernels are unaffected")
    return None


def pytest_collection_modifyitems(config, items):
    why = os.environ.get("TRITON_INTERPRET") == "1" and _interpreter_broken()
    if why:
        here = os.path.dirname(__file__)
        for item in items:
            if str(item.fspath).startswith(here):
                item.add_marker(pytest.mark.skip(reason=why))


@pytest.fixture(scope="session")
def device() -> torch.device:
    """Where kernel inputs live: CUDA when kernels compile, CPU under the interpreter."""
    interpreted = os.environ.get("TRITON_INTERPRET") == "1"
    return torch.device("cuda" if torch.cuda.is_available() and not interpreted else "cpu")
