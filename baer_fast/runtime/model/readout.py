"""Constrained verdict readout: log-softmax over the allowed label tokens only.

The one place the runtime chooses a readout implementation: the kernels' dispatcher when
it is installed, else the torch reference (which is the CPU path). Logits are computed from
the final normed hidden state and the gathered LM-head rows — never the full-vocab projection.
`read_model` and `model_logits` add what a model's own forward does after its LM head (a
logit scale: Cohere, Granite; a final soft-cap: Gemma 2), found at load (model_loader.logit_map).
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


def read_model(loaded, hidden, choice_ids, *, kernels: str = "auto"):
    """The model's own constrained log-probs at hidden [N, H] over choice_ids -> [N, C] fp32: its LM
    head, then its logit scale (folded into hidden and bias) and final soft-cap where it has them
    (the soft-cap on the torch path: the kernel has none; C is a handful of labels)."""
    weight, bias = lm_head(loaded.model)
    scale, cap = loaded.logit_scale, loaded.logit_softcap
    if scale != 1.0:
        hidden = hidden * scale
        bias = None if bias is None else bias * scale
    if cap is not None:
        from baer_fast.kernels.choice_logits import choice_logits_ref
        return choice_logits_ref(hidden, weight, choice_ids, bias=bias, softcap=cap)
    return read_choices(hidden, weight, choice_ids, bias=bias, kernels=kernels)


def read_rows(loaded, hidden, choices: list[tuple], *, kernels: str = "auto") -> list[list[float]]:
    """hidden [N, H], each row with its own label ids `choices[n]` -> per row its constrained
    log-probs (read_model), as float64 lists. Rows with the same labels are read in one call."""
    import torch
    by_choices: dict[tuple, list[int]] = {}
    for n, c in enumerate(choices):
        by_choices.setdefault(tuple(c), []).append(n)
    out: list = [None] * len(choices)
    for c, rows in by_choices.items():
        ids = torch.tensor(c, dtype=torch.long, device=hidden.device)
        lp = read_model(loaded, hidden[rows], ids, kernels=kernels).double().cpu().tolist()
        for n, row in zip(rows, lp):
            out[n] = row
    return out


def model_logits(loaded, hidden):
    """hidden [m, H] -> the model's full-vocabulary logits [m, V] fp32 (decoding's last positions)."""
    import torch
    weight, bias = lm_head(loaded.model)
    out = hidden @ weight.T
    if bias is not None:
        out = out + bias
    out = out.float()
    if loaded.logit_scale != 1.0:
        out = out * loaded.logit_scale
    if loaded.logit_softcap is not None:
        out = loaded.logit_softcap * torch.tanh(out / loaded.logit_softcap)
    return out
