"""Kernel dispatch: the one place that decides Triton or torch. Callers use only this module.

Boundary: tensors in, tensors out, and one decision — which implementation runs. Knows
nothing about models, prompts or heads.

    HAS_TRITON_GPU               decided once at import: a CUDA device and an importable Triton
    resolve_kernels(kind, device=None) -> "triton" | "torch"
        "auto"    Triton when HAS_TRITON_GPU and the tensors are (or will be) on CUDA, else the
                  torch reference; logs one line per distinct decision, once per process.
        "torch"   always the torch reference (the CPU path).
        "triton"  the Triton kernel; without a GPU raises KernelUnavailableError, unless
                  TRITON_INTERPRET=1 is set (the Triton interpreter on CPU: how tests run the
                  kernels; about 400x slower than torch, never chosen by "auto").
    read_choices(hidden, weight, choice_ids, *, bias=None, kernels="auto")
        constrained verdict readout: hidden [N, H], LM head weight [V, H], choice_ids [N, C]
        or [C], bias [V] or None -> logprobs [N, C] fp32 (see kernels/choice_logits.py).
    decode_attention(q, k_buf, v_buf, slots, lengths, *, scale, kernels="auto")
        one decode query per row over its slot's first lengths[b] columns: q [B, Hq, D],
        k_buf/v_buf [S, Hkv, C, D|Dv] -> [B, Hq, Dv] (see kernels/decode_attention.py).
    compute_evidence(u, eps=EPS, *, category=None, n_categories=0, kernels="auto")
        fused evidence features: u [N, K, M] (NaN = missing) -> Evidence(p, delta, z, zt, phi)
        (see kernels/evidence_features.py).
"""
from __future__ import annotations

import functools
import logging
import os

import torch

from baer_fast.errors import BaerError
from baer_fast.features.evidence import EPS
from baer_fast.kernels.choice_logits import choice_logits, choice_logits_ref
from baer_fast.kernels.decode_attention import decode_attention as _decode_attention
from baer_fast.kernels.decode_attention import decode_attention_ref
from baer_fast.kernels.evidence_features import (Evidence, evidence_features,
                                                 evidence_features_ref)

log = logging.getLogger(__name__)

KINDS = ("auto", "triton", "torch")


class KernelUnavailableError(BaerError):
    """An explicitly requested kernel implementation cannot run here."""


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


def decode_attention(q: torch.Tensor, k_buf: torch.Tensor, v_buf: torch.Tensor, slots: torch.Tensor,
                     lengths: torch.Tensor, *, scale: float, kernels: str = "auto") -> torch.Tensor:
    """q [B, Hq, D], k_buf [S, Hkv, C, D], v_buf [S, Hkv, C, Dv], slots [B], lengths [B] -> [B, Hq, Dv]."""
    fn = _decode_attention if resolve_kernels(kernels, q.device) == "triton" else decode_attention_ref
    return fn(q, k_buf, v_buf, slots, lengths, scale=scale)


def compute_evidence(u: torch.Tensor, eps: float = EPS, *, category: torch.Tensor | None = None,
                     n_categories: int = 0, kernels: str = "auto") -> Evidence:
    """u [N, K, M] (NaN = missing) -> Evidence(p, delta, z, zt [N, K], phi [N, 2K+G] | None)."""
    path = resolve_kernels(kernels, u.device)
    fn = evidence_features if path == "triton" else evidence_features_ref
    return fn(u, eps, category=category, n_categories=n_categories)
