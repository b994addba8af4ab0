"""`baer-fast serve --model M [--head H.json]`: the judge behind HTTP (docs/serving.md).

Opens the model once through `runtime/open.py` with the engine options of `experts` (the same
factory `experts` and `Judge.from_pretrained` use), then serves POST /v1/judge, POST /get_reward (OpenRLHF), GET /health and GET /metrics.
"""
from __future__ import annotations

import os


def add_arguments(p) -> None:
    from baer_fast.commands.experts import add_engine_arguments
    from baer_fast.serve.config import ServeConfig
    d = ServeConfig()
    p.add_argument("--model", required=True, help="local model directory (safetensors weights, chat template)")
    p.add_argument("--head", default=None, help="head artifact (default: the label-free default head)")
    p.add_argument("--host", default=d.host, help="address to bind (default loopback; 0.0.0.0 exposes it)")
    p.add_argument("--port", type=int, default=d.port, help="port to bind (default: %(default)s)")
    p.add_argument("--api-key-env", default=None, metavar="VAR",
                   help="environment variable holding the bearer token every endpoint but /health requires")
    p.add_argument("--max-batch-pairs", type=int, default=d.max_batch_pairs,
                   help="pairs merged into one engine call (default: %(default)s)")
    p.add_argument("--max-wait-ms", type=float, default=d.max_wait_ms,
                   help="how long a request waits for batch-mates (default: %(default)s)")
    p.add_argument("--max-queue", type=int, default=d.max_queue, help="waiting requests before 503 (default: %(default)s)")
    p.add_argument("--max-body-mb", type=float, default=d.max_body_bytes / 2**20,
                   help="larger bodies get 413 (default: %(default)s)")
    p.add_argument("--body-timeout-s", type=float, default=d.body_timeout_s,
                   help="seconds a request body may take to arrive after its headers; then 408 (default: %(default)s)")
    p.add_argument("--reward-method", choices=("mean_win", "bradley_terry"), default=d.reward_method,
                   help="/get_reward: how a prompt's round robin becomes rewards (default: %(default)s)")
    add_engine_arguments(p, serve=True)


def _config(args):
    from baer_fast.errors import InputError
    from baer_fast.serve.config import ServeConfig
    key = None
    if args.api_key_env:
        key = os.environ.get(args.api_key_env)
        if not key:
            raise InputError(f"environment variable {args.api_key_env} is unset or empty", field="--api-key-env")
    try:
        return ServeConfig(host=args.host, port=args.port, api_key=key, max_batch_pairs=args.max_batch_pairs,
                           max_wait_ms=args.max_wait_ms, max_queue=args.max_queue,
                           max_body_bytes=int(args.max_body_mb * 2**20), body_timeout_s=args.body_timeout_s,
                           reward_method=args.reward_method)
    except ValueError as e:
        raise InputError(str(e)) from None


def _require_serve_extra() -> None:
    import importlib.util

    from baer_fast.errors import BaerError
    missing = [m for m in ("fastapi", "uvicorn", "prometheus_client") if importlib.util.find_spec(m) is None]
    if missing:
        raise BaerError(f"baer-fast serve needs {', '.join(missing)}: pip install 'baer-fast[serve]'")


def run(args) -> int:
    from baer_fast.api import Judge, JudgeOptions, check_kernels, head_artifact
    from baer_fast.bank.runner import resolve_experts
    from baer_fast.commands.experts import generation_config
    from baer_fast.runtime.config import EngineConfig, memory_bytes
    from baer_fast.runtime.model.load import check_device, check_model_dir
    from baer_fast.runtime.open import HfOptions, engine_from_args, open_engine
    from baer_fast.serve.server import serve

    _require_serve_extra()
    config = _config(args)
    check_model_dir(args.model)
    check_device(args.device)
    art = head_artifact(args.head)      # its experts checked runnable, before the model loads
    check_kernels(args.kernels, args.device)
    # the budgets and seed the head's signals were made with, unless the flags say otherwise (as score --model)
    generation = generation_config(args, resolve_experts(list(art["experts"])), art.get("generation"))
    engine_config = EngineConfig(memory_budget_bytes=memory_bytes(args.memory_gb), batch_tokens=args.batch_tokens,
                                 kernels=args.kernels)
    engine = engine_from_args(args, lambda: open_engine(args.model, options=HfOptions(       # as `experts` opens it
        engine=engine_config, naive=args.naive, device=args.device, dtype=args.dtype, attn=args.attn,
        trust_remote_code=args.trust_remote_code)))
    judge = Judge(engine, art, options=JudgeOptions(kernels=args.kernels, dtype=args.dtype,
                                                    device=None if args.device == "auto" else args.device,
                                                    batch_invariant=True if args.batch_invariant else None,
                                                    truncate=args.truncate, generation=generation))
    judge.truncate_fix = "start serve without --no-truncate"
    try:
        return serve(judge, config)
    finally:
        if args.backend == "vllm":
            engine.close()          # vLLM's engine processes stop now, not at exit
