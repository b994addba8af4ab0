"""Triton kernels, each beside its torch reference (installed as `baer_fast.kernels`)."""
