"""`baer-fast check --model PATH`: will this judge run, and how? Before a long `experts` job.

Loads the model through the same loader `experts` uses, so every load-time check runs (safetensors
only, chat template, free memory, layer types, logits after the LM head, the tree probe), then
renders every protocol's prompts for an empty pair (the chat template's system role, the tokens
each expert's prompt costs beyond the pair's own text) and checks that every verdict label is a
single token, and runs the generative experts' decoder on a probe against plain forwards.
Prints what the loader chose and the room each expert's prompts leave for a pair; exit 0 when the
judge runs every expert, 2 with the reason when it cannot load, its decoder fails or its context
is too short for some expert (the other experts may still run: the output says so).
`--json` prints the same as one JSON object.
"""
from __future__ import annotations

import json


def add_arguments(p) -> None:
    from baer_fast.commands.experts import DEVICE_HELP, DTYPE_HELP
    p.add_argument("--model", required=True, help="local model directory (safetensors weights, chat template)")
    p.add_argument("--device", default="auto", help=DEVICE_HELP)
    p.add_argument("--dtype", default="auto", choices=("auto", "float32", "bfloat16", "float16"), help=DTYPE_HELP)
    p.add_argument("--attn", default="sdpa", choices=("sdpa", "flash_attention_2", "eager"),
                   help="attention implementation (default: %(default)s)")
    p.add_argument("--trust-remote-code", action="store_true", help="allow the model's own Python code")
    p.add_argument("--json", action="store_true", help="one JSON object instead of the table")


def _labels(enc) -> dict:
    """expert -> {label: its token id} for every expert that reads a verdict (raises, naming the
    model and label, on a label of several tokens)."""
    from baer_fast import protocols
    found = {name: getattr(protocols.get(name), "LABELS", None) for name in protocols.ALL}
    return {name: dict(zip(labels, enc.label_ids(labels))) for name, labels in found.items() if labels}


def _room(loaded, overhead: dict) -> tuple[dict, dict]:
    """(expert -> tokens its prompts leave for a pair's question and responses on this judge at the
    protocol's default budget: the room `--truncate` cuts a pair to (bank/truncation.py); generative
    expert -> the largest budget that still leaves MIN_TEXT_TOKENS, 0 if none does)."""
    from baer_fast import protocols
    from baer_fast.bank.generative import GenerationConfig
    from baer_fast.bank.truncation import MIN_TEXT_TOKENS, SAFETY_TOKENS, generation_reserve, largest_budget

    ctx, gen = loaded.context_len, GenerationConfig()
    room = {e: ctx - n - SAFETY_TOKENS - (generation_reserve(e, gen.budget(e)) if e in protocols.GENERATIVE else 0)
            for e, n in overhead.items()}
    largest = {e: largest_budget(e, ctx - overhead[e] - SAFETY_TOKENS - MIN_TEXT_TOKENS) for e in protocols.GENERATIVE}
    return room, largest


def report(loaded) -> dict:
    """What the loader chose for `loaded`, and what every expert's prompts cost (plain JSON)."""
    from baer_fast import protocols
    from baer_fast.bank.prompting import PromptEncoder
    from baer_fast.bank.truncation import MIN_TEXT_TOKENS, prompt_overhead
    from baer_fast.runtime.probes import check_decoder

    model, cfg = loaded.model, loaded.model.config.get_text_config()
    enc = PromptEncoder.of(loaded)
    labels = _labels(enc)
    overhead = prompt_overhead(loaded.tokenizer, protocols.PROMPT_EXPERTS + protocols.GENERATIVE, name=loaded.name)
    room, largest = _room(loaded, overhead)
    (hk, dk), (hv, dv) = loaded.kv_shape()
    return {
        "model": loaded.path, "class": type(model).__name__, "device": str(loaded.device),
        "dtype": str(loaded.dtype).removeprefix("torch."), "attention": cfg._attn_implementation,
        "weights_bytes": sum(t.numel() * t.element_size() for t in model.parameters()),
        "layers": cfg.num_hidden_layers, "context_len": loaded.context_len,
        "windows": dict(loaded.windows),
        "kv_bytes_per_token": loaded.kv_bytes_per_token, "kv_shape": {"k": [hk, dk], "v": [hv, dv]},
        "logit_scale": loaded.logit_scale, "logit_softcap": loaded.logit_softcap,
        "system_role": not enc.folds_system,
        "tree_probe": {"max_abs_logprob_diff": loaded.tree_probe_err},
        "labels": labels, "prompt_overhead_tokens": overhead, "room_tokens": room,
        "max_new_tokens_that_fit": largest,
        "too_short_for": [e for e, n in room.items() if n < MIN_TEXT_TOKENS and not largest.get(e)],
        "budget_too_large_for": [e for e, n in room.items() if n < MIN_TEXT_TOKENS and largest.get(e)],
        "decoder": check_decoder(loaded),
    }


def _size(n: int) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"


def _table(r: dict) -> str:
    windows = ", ".join(f"sliding window {w}" if w else "full attention" for w in r["windows"].values())
    cap = r["logit_softcap"]
    rows = [
        ("model", f"{r['model']} ({r['class']})"),
        ("runs on", f"{r['device']}, {r['dtype']}, {r['attention']} attention, weights {_size(r['weights_bytes'])}"),
        ("layers", f"{r['layers']} ({windows})"),
        ("context", f"{r['context_len']} tokens"),
        ("kv cache", f"{r['kv_bytes_per_token']:,} bytes per token (K {r['kv_shape']['k'][0]}x{r['kv_shape']['k'][1]}, "
                     f"V {r['kv_shape']['v'][0]}x{r['kv_shape']['v'][1]} per layer): "
                     f"{2**30 // r['kv_bytes_per_token']:,} tokens per GiB of --memory-gb"),
        ("logits", f"scale {r['logit_scale']:g}, soft-cap {cap:g}" if cap else f"scale {r['logit_scale']:g}, no soft-cap"),
        ("chat template", "takes a system message" if r["system_role"] else
         "takes no system message: the judge's system text opens the user message"),
        ("tree probe", f"max |log-prob difference| {r['tree_probe']['max_abs_logprob_diff']:.2g} against a plain forward"),
        ("labels", "every verdict label is one token: " + " ".join(
            sorted({lab for d in r["labels"].values() for lab in d}))),
        ("prompt overhead", ", ".join(f"{n} {t}" for n, t in r["prompt_overhead_tokens"].items())
         + " tokens beyond the question and responses"),
        ("room for a pair", ", ".join(f"{n} {t}" for n, t in r["room_tokens"].items())
         + " tokens of question and responses (generative experts at their default budgets)"),
    ]
    if r["budget_too_large_for"]:
        rows.append(("budgets", "the default budget leaves no pair room for " + ", ".join(
            f"{e} (--max-new-tokens {e}={r['max_new_tokens_that_fit'][e]} or less)" for e in r["budget_too_large_for"])))
    dec = r["decoder"]
    steps = ("decode steps attend in width groups" if dec.get("width_groups") else
             "decode steps attend in one width (every row over the widest row's columns)")
    rows.append(("decoder", f"greedy tokens are the model's own (largest gap {dec['max_logprob_gap']:.2g}); {steps}"
                 if dec["ok"] else f"fails: {dec['why']}"))
    width = max(len(k) for k, _ in rows)
    short = r["too_short_for"]
    if dec["ok"] and not short:
        verdict = "ok: this judge runs on the hf engine, every expert" + (
            " (some with smaller budgets: see budgets)" if r["budget_too_large_for"] else "")
    elif short:
        verdict = (f"partly: the context is too short for {', '.join(short)} (room above); "
                   + ("the other experts run" if len(short) < len(r["room_tokens"]) else "no expert runs"))
    else:
        verdict = "partly: the single-pass bank runs on the hf engine; the generative experts cannot (decoder above)"
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows) + "\n" + verdict


def run(args) -> int:
    from baer_fast.runtime.open import load_judge
    loaded = load_judge(args.model, device=args.device, dtype=args.dtype, attn=args.attn,
                        trust_remote_code=args.trust_remote_code)
    r = report(loaded)
    print(json.dumps(r) if args.json else _table(r))
    return 0 if r["decoder"]["ok"] and not r["too_short_for"] else 2
