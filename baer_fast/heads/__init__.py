"""Symmetric heads: each maps signals records to a signed score s with s(Tx) = -s(x).

A head is a plain object with `kind`, `score(records) -> np.ndarray [N]`,
`to_json() -> dict` and a `from_json(dict)` classmethod; `HEADS` maps kind to class.
"""
from __future__ import annotations

STACK_KINDS = ("mean", "vote", "shrunk", "stack")    # StackHead, weights fitted four ways (heads/stack.py)
HEAD_KINDS = ("constant",) + STACK_KINDS + ("route", "reference")


def head_class(kind: str):
    if kind == "constant":
        from baer_fast.heads.single import ConstantHead
        return ConstantHead
    if kind in STACK_KINDS:
        from baer_fast.heads.stack import StackHead
        return StackHead
    if kind == "route":
        from baer_fast.heads.router import RouterHead
        return RouterHead
    if kind == "default":             # label-free, built in code (artifact.default_artifact)
        from baer_fast.heads.default import DefaultHead
        return DefaultHead
    if kind == "reference":
        from baer_fast.heads.reference import ReferenceHead
        return ReferenceHead
    if kind == "pooled":      # a head for a condition without labels (selection/transfer.py)
        from baer_fast.heads.pooled import PooledHead
        return PooledHead
    raise KeyError(kind)
