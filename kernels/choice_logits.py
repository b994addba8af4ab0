"""Constrained single-token readout: log-softmax over a few allowed tokens, never the full vocab.

`choice_logits_ref` is the torch reference and the CPU path.
"""
from __future__ import annotations

import torch


def choice_logits_ref(hidden: torch.Tensor, weight: torch.Tensor, choice_ids: torch.Tensor, *,
                      bias: torch.Tensor | None = None) -> torch.Tensor:
    """hidden [N, H], weight [V, H], choice_ids [N, C] or [C] -> logprobs [N, C] fp32.

    Gathers the C LM-head rows first, so no [N, V] tensor is ever formed.
    """
    ids = choice_ids if choice_ids.dim() == 2 else choice_ids.unsqueeze(0).expand(hidden.shape[0], -1)
    rows = weight[ids]                                   # [N, C, H] — only the allowed rows
    logits = torch.einsum("nh,nch->nc", hidden.float(), rows.float())
    if bias is not None:
        logits = logits + bias[ids].float()
    return torch.log_softmax(logits, dim=-1)             # [N, C] fp32
