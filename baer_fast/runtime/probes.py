"""Load-time probes: does the prefix engine, or the decoder, reproduce the model's own plain forward?

The engine and the decoder call the model with a 4-D attention mask at explicit position ids
(tree rows, slots of different lengths). Most transformers families honour both; a few build
attention biases from the sequence layout instead (ALiBi: BLOOM raises, MPT silently gives
other verdicts), and remote code may do anything. `check_tree_path` runs at every load and
refuses such a model; `check_decoder` runs in `baer-fast check`. Both compare against plain
forwards of the same token ids, with tolerances that follow the dtype's rounding.
"""
from __future__ import annotations

import math

from baer_fast.runtime.model.load import ModelError

TOL_FP32 = 1e-3     # max |log-prob difference| from a plain forward in fp32 (the equality bar, loosened)
TOL_LOW = 0.1       # bf16 / fp16; the tree probe's bar is also at least 8x its rounding noise (_continuation_noise)
PREFIX = 10         # the probe's shared prefix, in tokens
TREES = 3           # probe trees at load, each one engine group
DECODE_PROBE = 6    # greedy tokens the decoder probe generates


def probe_prompts(vocab: int, tree: int = 0) -> list[tuple[int, ...]]:
    """One probe tree's prompts, every one below its shared prefix: two sibling branches and a
    grandchild (engine rows pack siblings under a 4-D mask at explicit positions); ids below
    `vocab`, different for every `tree`."""
    step, shift = (7, 11, 13, 17)[tree % 4], 3 + 5 * tree
    ids = [(step * i + shift) % 1000 % vocab for i in range(1, PREFIX + 18)]
    p, x, y, z = ids[:PREFIX], ids[PREFIX:-10], ids[-10:-5], ids[-5:]
    return [tuple(p + x), tuple(p + y), tuple(p + y + z)]


def _tolerance(loaded, noise=lambda: 0.0) -> float:
    """A probe value's bar: TOL_FP32 in fp32; else TOL_LOW, or 8x the measured `noise()` if larger."""
    import torch
    return TOL_FP32 if loaded.dtype == torch.float32 else max(TOL_LOW, 8 * noise())


def _too_many(missed: int, total: int) -> bool:
    """Both probes' refusal: more than a third of their values beyond the bar. A broken forward
    misses on most; rounding flips (a near tie, a mixture-of-experts routing) on a few."""
    return 3 * missed > total


def check_tree_path(loaded) -> float:
    """Refuse a model the prefix engine would not reproduce -> the probe's max |log-prob difference|.

    The engine computes shared prefixes once and siblings together under a 4-D attention mask at
    explicit position ids. A forward that rejects such a mask, or ignores it or the positions
    (ALiBi biases built from the sequence layout: BLOOM raises, MPT silently gives other
    verdicts), cannot run it. At load the engine runs TREES small trees of probe prompts, all
    below a shared prefix, and each prompt goes through a plain forward; the log-probabilities
    over 32 tokens are compared: beyond 1e-3 in fp32, or in bf16/fp16 beyond 0.1 or 8x the
    rounding noise of continuing a probe from a cache (whichever is larger), on more than a
    third of them (_too_many), the model is refused. A forward that ignores the
    mask or the positions misses on most (MPT: 6 of 9; the first sibling after a prefix sits
    where its positions say); rounding that flips a mixture-of-experts routing on one prompt
    (Mixtral in bf16: 0.87 on one of nine), or in one tree's shared prefix, on three at most."""
    from baer_fast.runtime.prefill import PrefixEngine
    from baer_fast.runtime.naive import NaiveEngine
    from baer_fast.runtime.queries import Query
    vocab = loaded.model.get_input_embeddings().num_embeddings
    choices = tuple(range(1, 33)) if vocab > 33 else tuple(range(vocab))
    groups = [[Query(ids, choices) for ids in probe_prompts(vocab, t)] for t in range(TREES)]
    name = type(loaded.model).__name__
    try:
        got = PrefixEngine(loaded).run(groups).logprobs
    except Exception as e:          # noqa: BLE001 -- any failure here is the model's forward refusing the tree
        raise ModelError(f"{name}: its forward cannot take the prefix engine's 4-D attention mask and position ids "
                         f"({type(e).__name__}: {e}); try --backend vllm") from e
    want = NaiveEngine(loaded).run(groups).logprobs
    errs = [max(abs(a - b) for a, b in zip(g, w)) for gg, ww in zip(got, want) for g, w in zip(gg, ww)]
    if not all(math.isfinite(e) for e in errs):      # non-finite weights: left to the runtime, which names the pairs
        return math.nan
    tol = _tolerance(loaded, lambda: _continuation_noise(loaded, groups[0][2], want[0][2]))
    missed = sum(e > tol for e in errs)
    if _too_many(missed, len(errs)):
        hint = "" if str(loaded.dtype) == "torch.float32" else " (if this is rounding, --dtype float32 settles it)"
        raise ModelError(f"{name}: the prefix engine's verdicts differ from the model's own plain forward on "
                         f"{missed} of {len(errs)} load-time probe prompts (by up to {max(errs):.3g} in log-probability, "
                         f"tolerance {tol:.3g}); its forward does not honour the engine's attention mask or "
                         f"position ids{hint}; try --backend vllm")
    return max(errs)


def _continuation_noise(loaded, query, want) -> float:
    """|log-prob difference| between one plain forward of the query and its shared prefix's
    forward continued from its cache (no mask): rounding alone, the scale of the dtype's noise."""
    import torch
    from transformers import DynamicCache

    from baer_fast.runtime.model.readout import read_model
    ids = torch.tensor([query.ids], device=loaded.device)
    cache, k = DynamicCache(), PREFIX
    with torch.inference_mode():
        loaded.hidden(ids[:, :k], torch.arange(k, device=ids.device)[None], None, cache)
        h = loaded.hidden(ids[:, k:], torch.arange(k, ids.shape[1], device=ids.device)[None], None, cache)
        lp = read_model(loaded, h[:, -1], torch.tensor(query.choices, device=ids.device))[0]
    return max(abs(float(a) - b) for a, b in zip(lp, want))


def check_decoder(loaded) -> dict:
    """The generative experts' decoder on three probe prompts of different lengths (one batch, so
    slots of different lengths share a forward): each greedy token must be the argmax of one
    plain forward over the prompt and the tokens before it, or within rounding of it (1e-3 in
    log-probability in fp32, 0.1 otherwise), on all but a third of them at most (a rounding flip
    of a near tie, or of a mixture-of-experts routing, moves one token, not most). Decode steps
    split into width groups wherever a column is saved, as real batches split them
    -> {"ok", "max_logprob_gap", "width_groups": whether steps ran split} or {"ok": False, "why"}."""
    import torch

    from baer_fast.runtime.decode import Decoder, GenRequest
    from baer_fast.runtime.model.readout import model_logits
    vocab = loaded.model.get_input_embeddings().num_embeddings
    prompts = probe_prompts(vocab)
    try:
        dec = Decoder(loaded, eos_ids=(), group_columns=0)
        results = dec.generate([GenRequest(p, DECODE_PROBE) for p in prompts])
    except Exception as e:          # noqa: BLE001 -- the model's forward refusing the decoder's cache or mask
        return {"ok": False, "why": f"{type(e).__name__}: {e}"}
    gaps = []
    with torch.inference_mode():
        for p, res in zip(prompts, results):
            seq = torch.tensor([p + res.tokens[0]], device=loaded.device)
            h = loaded.hidden(seq)[0, len(p) - 1: -1]
            lp = torch.log_softmax(model_logits(loaded, h), -1)
            picked = lp.gather(1, torch.tensor(res.tokens[0], device=lp.device)[:, None])[:, 0]
            gaps += (lp.max(-1).values - picked).tolist()
    tol = _tolerance(loaded)
    missed = sum(g > tol for g in gaps)
    if _too_many(missed, len(gaps)):
        return {"ok": False, "why": f"its greedy tokens are not the model's own ({missed} of {len(gaps)} below the "
                                    f"argmax by more than {tol:g} in log-probability, up to {max(gaps):.3g})"}
    return {"ok": True, "max_logprob_gap": max(gaps), "width_groups": dec.splits_attention}
