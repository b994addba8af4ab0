"""Constrained verdict readout: log-softmax over the allowed label tokens only.

The one place the runtime chooses a readout implementation: the kernels' dispatcher when
it is installed, else the torch reference (which is the CPU path). Logits are computed from
the final normed hidden state and the gathered LM-head rows — never the full-vocab projection.
"""
from __future__ import annotations


def read_choices(hidden, weight, choice_ids, *, bias=None, kernels: str = "auto"):
    """hidden [N, H], weight [V, H] (LM head), choice_ids [N, C] or [C] -> log-probs [N, C] fp32."""
    try:
        from baer_fast.kernels.dispatch import read_choices as dispatched
    except ImportError:
        dispatched = None
    if dispatched is not None:
        return dispatched(hidden, weight, choice_ids, bias=bias, kernels=kernels)
    if kernels == "triton":
        from baer_fast.errors import BaerError
        raise BaerError("--kernels triton was requested but this install has no Triton readout "
                        "(baer_fast.kernels.dispatch is missing)")
    from baer_fast.kernels.choice_logits import choice_logits_ref
    return choice_logits_ref(hidden, weight, choice_ids, bias=bias)


def lm_head(model):
    """(weight [V, H], bias [V] | None) of the model's output projection."""
    head = model.get_output_embeddings()
    return head.weight, getattr(head, "bias", None)
