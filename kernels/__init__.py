"""Triton kernels, each beside its torch reference (installed as `baer_fast.kernels`).

    choice_logits.py      constrained single-token readout over gathered LM-head rows
    evidence_features.py  fused p, delta, z, z-tilde and stack map phi from expert runs
    dispatch.py           the one place Triton-or-torch is decided; callers import from here

Importing this package imports neither torch nor Triton.
"""
