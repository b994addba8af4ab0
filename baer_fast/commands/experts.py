"""`baer-fast experts`: run the single-pass expert bank of a local judge model on pairs -> signals.

Append-only and resumable by id: reruns skip ids already in --out. Derived experts
(pride, calibraeval) need all their source runs before their label-free fit, so without
--derived-params the prompt experts stream to `<out>.raw.jsonl` (resumable) and --out is
written at the end, with the fitted parameters beside it in `<out>.derived.json`.
Generative experts (cot, self_consistency, rubric, prepair, deliberate, reference; `--experts all`
for the full bank) decode with per-expert budgets (--max-new-tokens) and a global --seed;
--keep-texts writes their generated texts to `<out>.texts.jsonl`; a cost report per expert
(generations, tokens decoded, seconds) is printed at the end. Pairs run in chunks of distinct
contents in content order (bank/canonical.py); the finished file is put back in input order.
"""
from __future__ import annotations

import json
import logging
import os
import sys

from baer_fast.commands.stream import engine_kind, stream_signals
from baer_fast.errors import InputError

log = logging.getLogger("baer_fast")
DEVICE_HELP = "torch device: auto (cuda when available, else cpu), cpu, cuda, cuda:N (default: %(default)s)"
DTYPE_HELP = "weights' dtype: auto is bfloat16 on CUDA, float32 on CPU (default: %(default)s)"


def add_arguments(p) -> None:
    p.add_argument("--model", required=True, help="local model directory (safetensors weights, chat template)")
    p.add_argument("--input", required=True, help="pairs JSONL")
    p.add_argument("--out", required=True, help="signals JSONL (appended to; rerun resumes)")
    p.add_argument("--experts", default=None,
                   help="comma-separated subset of: direct,score,pointwise,pride,calibraeval (default: these) and "
                        "the generative cot,self_consistency,rubric,prepair,deliberate,reference (cot, self_consistency and "
                        "deliberate bring their <name>_native verdicts, docs/protocols.md); 'all' = every one")
    p.add_argument("--keep-texts", action="store_true",
                   help="write generated texts (reasoning, rubric, analyses, reference) to <out>.texts.jsonl")
    p.add_argument("--chunk-pairs", type=int, default=16, help="pairs per durable append (default: %(default)s)")
    p.add_argument("--derived-params", default=None,
                   help="frozen pride/calibraeval parameters (JSON from an earlier run's <out>.derived.json)")
    p.add_argument("--overwrite", action="store_true", help="discard an existing --out instead of resuming")
    add_engine_arguments(p)


def add_engine_arguments(p, *, serve: bool = False) -> None:
    """The engine options of every command that runs a judge model (experts, score --model, serve).
    serve cuts over-long pairs by default, as the Python Judge does: there --no-truncate refuses them."""
    from baer_fast.runtime.config import EngineConfig
    d = EngineConfig()
    p.add_argument("--max-new-tokens", default=None,
                   help="generation budget per generative expert, e.g. cot=256,reference=4096, or one number "
                        "for all (default: each protocol's own; with score --model and serve, the head's recorded "
                        "budgets)")
    p.add_argument("--seed", type=int, default=None,
                   help="global seed of sampled generations (self_consistency; default 0, or with score --model and "
                        "serve the seed the head's signals were made with)")
    p.add_argument("--batch-tokens", type=int, default=d.batch_tokens,
                   help="cap on padded tokens per forward (default: derived from --memory-gb)")
    p.add_argument("--memory-gb", type=float, default=d.memory_budget_bytes / 2**30,
                   help="one memory budget for held KV, a forward's activations and the decoder's slots, GiB "
                        "(default: %(default)s)")
    p.add_argument("--kernels", choices=("auto", "triton", "torch"), default=d.kernels,
                   help="constrained-readout implementation (default: %(default)s)")
    p.add_argument("--device", default="auto", help=DEVICE_HELP)
    p.add_argument("--dtype", default="auto", choices=("auto", "float32", "bfloat16", "float16"), help=DTYPE_HELP)
    p.add_argument("--attn", default="sdpa", choices=("sdpa", "flash_attention_2", "eager"),
                   help="attention implementation; flash_attention_2 (the [gpu] extra) runs the unmasked "
                        "calls, and SDPA the masked ones (tree rows, decoder slots), which it cannot take")
    p.add_argument("--trust-remote-code", action="store_true", help="allow the model's own Python code")
    p.add_argument("--naive", action="store_true", help="reference path: one plain forward per prompt")
    p.add_argument("--batch-invariant", action="store_true",
                   help="compute each distinct pair in engine and decoder calls of its own: its runs are the same "
                        "bits whatever other pairs share the input (hf backend; slower, docs/protocols.md)")
    if serve:
        p.add_argument("--no-truncate", dest="truncate", action="store_false",
                       help="refuse a pair longer than the judge's context (its request gets 422) instead of "
                            "cutting it symmetrically, as by default (as the Python Judge does)")
    else:
        p.add_argument("--truncate", action="store_true",
                       help="cut a pair longer than the judge's context symmetrically (both responses to one token "
                            "cap, the question to a quarter of the room), as the Python Judge does, instead of "
                            "stopping on it; cut pairs are counted and marked meta.truncated")
    from baer_fast.runtime.vllm.backend import add_arguments as add_backend_arguments
    add_backend_arguments(p)     # --backend hf|vllm, --tensor-parallel-size, ... (vllm imported only if chosen)


def _experts(arg) -> list[str]:
    from baer_fast.bank.runner import resolve_experts
    from baer_fast import protocols
    names = None if arg is None else [x.strip() for x in arg.split(",") if x.strip()]
    if names == []:
        raise InputError(f"{arg!r} names no expert (a comma-separated list, or all)", field="--experts")
    if names == ["all"]:
        names = list(protocols.ALL)
    try:
        return resolve_experts(names)
    except ValueError as e:
        raise InputError(str(e), field="--experts") from None


def fingerprint(args, names: list[str], params_file: str | None) -> dict:
    """What a resumed run must share with the one that wrote the output (args.generation: the
    generative experts' budgets and seed, set before this is called)."""
    from baer_fast import protocols
    from baer_fast.io.resumable import file_sha256
    from baer_fast.runtime.model.folder import weights_fingerprint
    # sizes, headers and sampled bytes of the files transformers loads: another checkpoint of the same
    # shapes copied in (which sizes alone let through) is refused, reading well under 1 MB per file
    weights = weights_fingerprint(args.model)
    return {"command": "experts", "model": os.path.abspath(args.model),
            "model_config_sha256": file_sha256(os.path.join(args.model, "config.json")),
            "weights": weights, "input_sha256": file_sha256(args.input), "experts": names,
            "engine": engine_kind(args), "dtype": args.dtype, **_runs_on(args),
            "derived_params_sha256": file_sha256(params_file) if params_file else None,
            # only when on, so outputs written before the flags existed still resume
            **({"batch_invariant": True} if getattr(args, "batch_invariant", False) else {}),
            **({"truncate": True} if getattr(args, "truncate", False) else {}),
            **({"generation": {n: gen.settings(n) for n in names if n in protocols.GENERATIVE}}
               if (gen := getattr(args, "generation", None)) is not None else {})}


def _runs_on(args) -> dict:
    """{"runs_on": "cuda/bfloat16"} where the runs are not fp32 on a CPU: a run begun on one device or
    dtype ("auto" is bf16 on CUDA) and resumed on another would mix runs of other precision. Absent
    for CPU fp32, so outputs written before the key existed still resume there."""
    from baer_fast.runtime.model.load import check_device, resolve_dtype
    if engine_kind(args) == "vllm":
        return {}
    device = check_device(args.device).split(":")[0]
    dtype = str(resolve_dtype(device, args.dtype)).removeprefix("torch.")
    return {} if (device, dtype) == ("cpu", "float32") else {"runs_on": f"{device}/{dtype}"}


def generation_config(args, names: list[str], recorded: dict | None = None):
    """GenerationConfig from --max-new-tokens/--seed, or None when no generative expert is asked for.
    `recorded` (a head's `generation`: the settings its signals were made with) fills what the flags
    leave out, and a flag that departs from it is warned about: another budget or seed changes runs."""
    from baer_fast import protocols
    from baer_fast.bank.generative import GenerationConfig, recorded_budgets_seed
    from baer_fast.runtime.config import memory_bytes
    gen = [n for n in names if n in protocols.GENERATIVE]
    if not gen:
        return None
    recorded = recorded or {}
    budgets = {}
    for item in (args.max_new_tokens or "").split(","):
        name, _, val = item.strip().rpartition("=")
        if not val:
            continue
        try:
            n = int(val)
        except ValueError:
            raise InputError(f"{val!r} is not a whole number of tokens", field="--max-new-tokens") from None
        if n < 1 or (name and name not in protocols.GENERATIVE):
            raise InputError(f"{item.strip()!r}: expected EXPERT=N with N >= 1 and EXPERT one of "
                             f"{', '.join(protocols.GENERATIVE)}", field="--max-new-tokens")
        budgets.update({name: n} if name else {g: n for g in protocols.GENERATIVE})
    was, seed = recorded_budgets_seed(recorded)
    seed = args.seed if args.seed is not None else seed
    for e, r in recorded.items():
        if e in budgets and budgets[e] != r["max_new_tokens"] or args.seed is not None and args.seed != r["seed"]:
            log.warning("%s: the head's signals were made with max_new_tokens=%d, seed=%d; this run uses %d, %d, "
                        "so its runs differ from those the head was fitted on", e, r["max_new_tokens"], r["seed"],
                        budgets.get(e, r["max_new_tokens"]), seed)
    budgets = {**was, **budgets}
    # one memory budget: the decoder's slots and activations live within --memory-gb like the engine's KV
    return GenerationConfig(max_new_tokens=budgets, seed=seed, memory_budget_bytes=memory_bytes(args.memory_gb))


def _load_params(path: str | None) -> dict | None:
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as fh:
            params = json.load(fh)
    except FileNotFoundError:
        raise InputError("file not found", path=path, field="--derived-params") from None
    except json.JSONDecodeError as e:
        raise InputError(f"malformed JSON: {e}", path=path, field="--derived-params") from None
    if not isinstance(params, dict):
        raise InputError(f"expected a JSON object {{expert: parameters}}, got {type(params).__name__}",
                         path=path, field="--derived-params")
    return params


def run(args) -> int:
    import contextlib

    from baer_fast import protocols
    from baer_fast.io.resumable import holding
    from baer_fast.io.records import read_pairs
    from baer_fast.runtime.model.load import check_device, check_model_dir

    names = _experts(args.experts)
    if args.chunk_pairs < 1:
        raise InputError("must be at least 1", field="--chunk-pairs")
    _check_useful(args, names)
    check_model_dir(args.model)
    check_device(args.device)
    pairs = read_pairs(args.input)
    params = _load_params(args.derived_params)
    derived = [n for n in names if n in protocols.DERIVED_EXPERTS]
    if params is not None:
        missing = [n for n in derived if n not in params]
        if missing:
            raise InputError(f"no parameters for {', '.join(missing)}", path=args.derived_params)
    two_phase = bool(derived) and params is None
    stream_names = (protocols.prompt_experts_for(names) + [n for n in names if n in protocols.GENERATIVE + protocols.NATIVE]
                    if two_phase else names)
    target = args.out + ".raw.jsonl" if two_phase else args.out
    # two phases: --out is locked for the whole run, as its own writer would lock it, before --overwrite
    # removes anything there (another run on it, derived experts or not, is refused)
    with holding(args.out) if two_phase else contextlib.nullcontext():
        if two_phase:
            _claim_final_out(args, target)
        args.generation = generation_config(args, names)
        fp = fingerprint(args, stream_names, args.derived_params)
        pairs = fit_context(args, pairs, names)      # cut (--truncate), or an over-long pair stops the run here
        stats = stream_signals(args, pairs, stream_names, derived if not two_phase else [], params, target, fp)
        if two_phase:
            _finish_derived(args, names, derived, target)
    print(stats, file=sys.stderr)
    return 0


def _check_useful(args, names: list[str]) -> None:
    """--derived-params and --keep-texts with no expert that uses them would be ignored: refused."""
    from baer_fast import protocols
    if args.derived_params is not None and not set(names) & set(protocols.DERIVED_EXPERTS):
        raise InputError(f"only used by {', '.join(protocols.DERIVED_EXPERTS)}, which --experts leaves out",
                         field="--derived-params")
    if args.keep_texts and not set(names) & set(protocols.GENERATIVE):
        raise InputError("no generative expert in --experts writes texts", field="--keep-texts")


def _claim_final_out(args, raw: str) -> None:
    """With derived experts the resumable file is <out>.raw.jsonl and --out is written at the end.
    --out may only be replaced by --overwrite or by this run's own resume (its raw file exists, and --out
    has no progress record: such a run never leaves one there). An unrelated file, or the resumable
    output of a run without derived experts, is refused as the resumable writer refuses one; with
    --overwrite that run's progress record goes too, so resuming it later cannot cut the new file."""
    from baer_fast.io.resumable import progress_path

    prog = progress_path(args.out)
    if not args.overwrite and (os.path.exists(prog) or os.path.exists(args.out) and not os.path.exists(raw)):
        raise InputError("output exists and this run did not write it (with derived experts the resumable "
                         f"file is {raw}); pass --overwrite to replace it, or choose another --out", path=args.out)
    if os.path.exists(prog):
        os.unlink(prog)


def fit_context(args, pairs, names, rejects=None) -> list:
    """Pairs the judge's context holds, before any model work. --truncate: every pair cut to the room
    the longest prompt of `names` leaves (bank/truncation.py), once for the whole bank, so every
    expert (every stage of a cascade, every group of a pruned head) reads the same texts. Otherwise a pair the engine would refuse is a
    located error at the first one (not hours into a run), or under --on-error skip a reject."""
    import json

    from baer_fast.bank.truncation import cut_pairs, cut_room, over_long
    from baer_fast.runtime.model.load import tokenizer_and_context

    tok, context_len, name = tokenizer_and_context(args.model, trust_remote_code=args.trust_remote_code)
    if getattr(args, "truncate", False):
        room = cut_room(tok, context_len, names, args.generation, name=name)
        pairs, n_cut = cut_pairs(pairs, tok, room)
        if n_cut:
            log.warning("--truncate: cut %d of %d pairs to the %d tokens of question and responses that %s's "
                        "context leaves (meta.truncated)", n_cut, len(pairs), room, name)
        return pairs
    long = over_long(pairs, tok, context_len, names, args.generation, name=name)
    for p, why in long:
        err = InputError(f"pair {p.id!r}: {why}", path=args.input, line=p.line or None, field="response_a")
        if rejects is None:
            raise err
        rejects.add(err, json.dumps(p.to_json(), ensure_ascii=False))
    dropped = {p.id for p, _ in long}
    return [p for p in pairs if p.id not in dropped]


def _finish_derived(args, names, derived, raw_path) -> None:
    """Fit pride/calibraeval on the non-test rows of the raw run; write --out and the params."""
    from baer_fast.io.jsonl import atomic_open
    from baer_fast.io.records import Signals, read_signals, write_signals
    from baer_fast.bank.runner import apply_derived, fit_derived

    raw = read_signals(raw_path)
    params = fit_derived([(s, s.experts) for s in raw], derived)
    out = [Signals(s.id, {n: apply_derived(s.experts, derived, params)[n] for n in names}, s.subset, s.label,
                   s.split, _final_meta(s.meta, names), category=s.category) for s in raw]
    with atomic_open(args.out + ".derived.json") as fh:
        fh.write(json.dumps(params, indent=1) + "\n")
    write_signals(args.out, out)
    log.info("fitted %s on %d non-test pairs -> %s", ", ".join(derived), params[derived[0]]["n_fit"],
             args.out + ".derived.json")


def _final_meta(meta: dict, names) -> dict:
    """The raw run's meta with each derived expert's cost cell (bank/costs.with_derived), so that
    `fit --budget` and `--cascade` can price the bank it wrote."""
    from baer_fast.bank.costs import with_derived_meta
    if not isinstance(meta.get("expert_cost"), dict):
        return meta
    return with_derived_meta(meta, names)
