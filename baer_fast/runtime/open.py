"""The one place engines and decoders are built: `open_engine`, `open_decoder`, `load_judge`.

Boundary: a model (a local directory, a loaded model, or an engine, returned as is) and a
backend's options in; an engine (token ids in, verdict log-probabilities out) or a decoder out.
`baer-fast experts`, `score --model`, `check`, the in-process `Judge` and the bank build them
here and nowhere else. Sits on top of the runtime: it imports the engines, the probes and the
vLLM backend; none of them imports it.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from baer_fast.errors import BaerError
from baer_fast.runtime.config import EngineConfig

BACKENDS = ("hf", "vllm")


@dataclass(frozen=True)
class HfOptions:
    """How the embedded (transformers) backend loads the judge and which engine runs it."""
    engine: EngineConfig = field(default_factory=EngineConfig)
    naive: bool = False                 # the reference path: one plain forward per prompt
    device: str = "auto"                # "auto" = cuda when available, else cpu
    dtype: str = "auto"                 # "auto" = bfloat16 on CUDA, float32 on CPU
    attn: str = "sdpa"                  # "sdpa" | "flash_attention_2" | "eager"
    trust_remote_code: bool = False     # allow the model directory's own Python code

    def load_kw(self) -> dict:
        kw = asdict(self)
        del kw["engine"], kw["naive"]
        return kw


def load_judge(path: str, *, device: str = "auto", dtype: str = "auto", attn: str = "sdpa",
               trust_remote_code: bool = False):
    """Load a local judge model (model.load.load_model), then run the load-time tree probe
    (probes.check_tree_path), which refuses a model whose tree path disagrees with a plain forward."""
    from baer_fast.runtime.model.load import load_model
    from baer_fast.runtime.probes import check_tree_path
    from baer_fast.runtime.reproducible import check as check_reproducible
    loaded = load_model(path, device=device, dtype=dtype, attn=attn, trust_remote_code=trust_remote_code)
    loaded.tree_probe_err = check_tree_path(loaded)
    if loaded.device.type == "cpu":
        check_reproducible()
    return loaded


def is_engine(obj) -> bool:
    return hasattr(obj, "run") and hasattr(obj, "loaded")


def open_engine(model, *, backend: str = "hf", options=None):
    """model: a directory, a LoadedModel, or an engine (returned as is) -> an engine.

    backend "hf": `options` is an HfOptions (default HfOptions()): the prefix engine, or the
    naive reference with `naive=True`. backend "vllm": `options` is a VllmOptions.
    """
    if is_engine(model):
        return model
    if backend == "vllm":
        from baer_fast.runtime.vllm.backend import VllmOptions
        return open_vllm(str(model), options or VllmOptions())
    if backend != "hf":
        raise BaerError(f"unknown backend {backend!r} (choose from {', '.join(BACKENDS)})")
    from baer_fast.runtime.model.load import LoadedModel
    from baer_fast.runtime.naive import NaiveEngine
    from baer_fast.runtime.prefill import PrefixEngine
    opts = options or HfOptions()
    loaded = model if isinstance(model, LoadedModel) else load_judge(str(model), **opts.load_kw())
    return NaiveEngine(loaded, kernels=opts.engine.kernels) if opts.naive else PrefixEngine(loaded, opts.engine)


def open_vllm(path: str, options):
    """One vLLM engine, or with data_parallel_size > 1 the process-sharded one (same interface)."""
    if options.data_parallel_size > 1:
        from baer_fast.runtime.vllm.dp import DataParallelEngine
        return DataParallelEngine(path, options)
    from baer_fast.runtime.vllm.backend import VllmEngine
    return VllmEngine.from_path(path, options)


def open_decoder(engine, config):
    """The generative experts' decoder for `engine`: the engine's own where it has one (the vLLM
    backend's `make_decoder`), else the hf decoder on its torch model. config: max_rows and
    memory_budget_bytes (bank.generative.GenerationConfig)."""
    if hasattr(engine, "make_decoder"):
        return engine.make_decoder(config)
    from baer_fast.runtime.decode import Decoder
    return Decoder(engine.loaded, max_rows=config.max_rows, memory_budget_bytes=config.memory_budget_bytes,
                   kernels=getattr(getattr(engine, "config", None), "kernels", "auto"))


def engine_from_args(args, make_hf_engine):
    """The engine `baer-fast experts` should use: `make_hf_engine()` for --backend hf, else vLLM.

    --naive and --batch-invariant have no vLLM meaning and are refused with --backend vllm
    (explicit requests fail loudly).
    """
    from baer_fast.runtime.vllm.backend import options_from_args
    if getattr(args, "backend", "hf") != "vllm":
        asked = [flag for flag, on in (("--tensor-parallel-size", args.tensor_parallel_size != 1),
                                       ("--data-parallel-size", args.data_parallel_size != 1),
                                       ("--distributed-executor-backend", args.distributed_executor_backend),
                                       ("--vllm-block-size", args.vllm_block_size)) if on]
        if asked:
            raise BaerError(f"{', '.join(asked)} only apply to --backend vllm (the hf engine runs one "
                            "model on one device)")
        return make_hf_engine()
    if getattr(args, "naive", False):
        raise BaerError("--naive is the hf reference path; it cannot be combined with --backend vllm")
    if getattr(args, "batch_invariant", False):     # vLLM's prefix cache reuses KV computed beside other pairs
        raise BaerError("--batch-invariant needs --backend hf (vLLM reuses prefix KV across calls)")
    return open_vllm(args.model, options_from_args(args))
