"""The one guarded Triton import shared by the kernel modules.

The torch references must work where Triton is absent or broken, so any import failure
means "no kernel": `triton` and `tl` are None and the reason is kept for the error raised
when a kernel is actually requested.
"""
from __future__ import annotations

from baer_fast.errors import BaerError

try:
    import triton
    import triton.language as tl
    TRITON_IMPORT_ERROR: str | None = None
except Exception as exc:  # noqa: BLE001 — any failure means "no kernel", reported on use
    triton, tl = None, None
    TRITON_IMPORT_ERROR = f"{type(exc).__name__}: {exc}"


class KernelUnavailableError(BaerError):
    """An explicitly requested kernel implementation cannot run here."""


def require_triton() -> None:
    """Raise KernelUnavailableError (a BaerError) when a kernel is asked for without Triton."""
    if triton is None:
        raise KernelUnavailableError(f"Triton is not importable here ({TRITON_IMPORT_ERROR}); "
                                     "use kernels='torch' or install triton>=3.6")
