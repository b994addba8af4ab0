"""Run-to-run reproducibility of torch's CPU matrix products (Intel MKL).

Without MKL's Conditional Numerical Reproducibility (CNR) mode, an fp32 GEMM of the same
operands can round differently from one call to the next (measured on this project's 2-core
AMD EPYC machines with one OpenMP thread: the same generative bank run twice in one process
differed by ~5e-8 in its runs, and a sampled expert drew other tokens). With CNR on, MKL picks
one code path at start-up and keeps it, so the same call gives the same bits every time.

`baer_fast/__init__.py` sets `MKL_CBWR=AUTO` (unless the user set it) before anything imports
torch; MKL reads it at its first call. If torch ran a matrix product before `baer_fast` was
imported, the mode is fixed already: `check()` then warns once, at model load. CNR "AUTO" also
happened to be faster here for decode-shaped products (docs/protocols.md, "Symmetry and
determinism").
"""
from __future__ import annotations

import ctypes
import functools
import logging
import os

log = logging.getLogger("baer_fast")

ENV = "MKL_CBWR"
DEFAULT = "AUTO"
_OFF = 1          # mkl_cbwr_get(MKL_CBWR_BRANCH) when CNR is off (MKL_CBWR_OFF)
_BRANCH = 1       # MKL_CBWR_BRANCH


def set_default() -> None:
    """Ask for CNR before MKL starts (a user's own MKL_CBWR wins)."""
    os.environ.setdefault(ENV, DEFAULT)


@functools.lru_cache(maxsize=1)
def _mkl():
    """torch's statically linked MKL service functions, or None (no MKL: ARM, a non-MKL build)."""
    import torch
    lib = os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so")
    try:
        handle = ctypes.CDLL(lib)
        get = handle.mkl_serv_cbwr_get
    except (OSError, AttributeError):
        return None
    get.restype, get.argtypes = ctypes.c_int, [ctypes.c_int]
    return get


def cnr_branch() -> int | None:
    """MKL's current CNR branch (1 = off), or None where torch has no MKL."""
    get = _mkl()
    return None if get is None else int(get(_BRANCH))


@functools.lru_cache(maxsize=1)
def check() -> bool:
    """Warn once if torch's MKL runs without CNR; -> whether CPU GEMMs are reproducible (True
    where there is no MKL to ask)."""
    branch = cnr_branch()
    if branch == _OFF:
        log.warning("MKL runs without conditional numerical reproducibility: the same CPU matrix "
                    "product can round differently run to run (a sampled expert may then draw other "
                    "tokens). Import baer_fast before torch runs any matrix product, or set "
                    "MKL_CBWR=AUTO in the environment.")
        return False
    return True
