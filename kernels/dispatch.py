"""Kernel dispatch: the one place that decides Triton or torch. Callers use only this module.

Boundary: tensors in, tensors out, and one decision — which implementation runs. Knows
nothing about models, prompts or heads.

    HAS_TRITON_GPU                       a CUDA device and an importable Triton, decided at import
    resolve_kernels(kind, device=None)   "auto" | "torch" | "triton" -> "triton" | "torch"
    read_choices(hidden, weight, choice_ids, *, bias=None, kernels="auto")   see choice_logits.py
    compute_evidence(u, eps=EPS, *, category=None, n_categories=0, kernels="auto")
                                         see evidence_features.py

"auto" picks Triton for CUDA tensors when HAS_TRITON_GPU, else torch; "triton" without a GPU
raises KernelUnavailableError unless TRITON_INTERPRET=1 (the interpreter the tests use, never
chosen by "auto"). More: docs/architecture.md.
"""
from __future__ import annotations

import functools
import logging
import os

import torch

from baer_fast.kernels._triton import KernelUnavailableError
from baer_fast.kernels.choice_logits import choice_logits, choice_logits_ref
from baer_fast.kernels.constants import EPS
from baer_fast.kernels.evidence_features import (Evidence, evidence_features,
                                                 evidence_features_ref)

log = logging.getLogger(__name__)

KINDS = ("auto", "triton", "torch")


def _probe_triton_gpu() -> bool:
    if not torch.cuda.is_available():
        return False
    from baer_fast.kernels import choice_logits as _cl   # guarded import of triton
    return _cl.triton is not None


HAS_TRITON_GPU: bool = _probe_triton_gpu()   # decided once; never reassigned


def interpreting() -> bool:
    """TRITON_INTERPRET=1: Triton runs kernels in its CPU interpreter (read per call)."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def resolve_kernels(kind: str, device: torch.device | str | None = None) -> str:
    """"auto" | "triton" | "torch" (+ where the tensors live) -> "triton" | "torch"."""
    if kind not in KINDS:
        raise KernelUnavailableError(f"kernels must be one of {', '.join(KINDS)}; got {kind!r}")
    on_cuda = device is None or torch.device(device).type == "cuda"
    if kind == "torch":
        return "torch"
    if kind == "triton":
        _require_triton_here(on_cuda)
        return "triton"
    path = "triton" if HAS_TRITON_GPU and on_cuda else "torch"
    _announce(path)
    return path


def _require_triton_here(on_cuda: bool) -> None:
    if interpreting():
        return
    if not HAS_TRITON_GPU:
        raise KernelUnavailableError(
            "kernels='triton' needs a CUDA device and an importable Triton (none here); "
            "use kernels='auto' or 'torch', or set TRITON_INTERPRET=1 to interpret on CPU")
    if not on_cuda:
        raise KernelUnavailableError("kernels='triton' needs CUDA tensors; got CPU tensors")


@functools.lru_cache(maxsize=None)
def _announce(path: str) -> None:
    """One log line per distinct automatic decision per process (cache_clear() to re-arm)."""
    why = "CUDA device with Triton" if path == "triton" else "no CUDA device with Triton"
    log.info("baer_fast.kernels: kernels='auto' uses the %s path (%s)", path, why)


def read_choices(hidden: torch.Tensor, weight: torch.Tensor, choice_ids: torch.Tensor, *,
                 bias: torch.Tensor | None = None, kernels: str = "auto") -> torch.Tensor:
    """hidden [N, H], weight [V, H], choice_ids [N, C] | [C] -> logprobs [N, C] fp32."""
    fn = choice_logits if resolve_kernels(kernels, hidden.device) == "triton" else choice_logits_ref
    return fn(hidden, weight, choice_ids, bias=bias)


def compute_evidence(u: torch.Tensor, eps: float = EPS, *, category: torch.Tensor | None = None,
                     n_categories: int = 0, kernels: str = "auto") -> Evidence:
    """u [N, K, M] (NaN = missing) -> Evidence(p, delta, z, zt [N, K], phi [N, 2K+G] | None)."""
    path = resolve_kernels(kernels, u.device)
    fn = evidence_features if path == "triton" else evidence_features_ref
    return fn(u, eps, category=category, n_categories=n_categories)
