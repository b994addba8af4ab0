"""Load a local judge model directory: safetensors weights only, chat template required.

Nothing is downloaded (local_files_only). What the folder must hold is checked first (folder.py:
config, tokenizer, safetensors weights; pickle refused); remote code is off unless asked.
dtype/device auto: bf16 on CUDA, fp32 on CPU; weights that cannot fit in the device's free memory
in that dtype are refused before loading. SDPA attention, or flash-attention 2 when requested
and importable.
"""
from __future__ import annotations

import inspect
import logging
import os
from dataclasses import dataclass, field

from baer_fast.errors import BaerError, InputError
from baer_fast.runtime.model.folder import (check_model_dir, read_config, read_tokenizer, stored_bytes,
                                            weight_elements)

log = logging.getLogger("baer_fast")


MASK_ATTENTION = ("sdpa", "eager")     # attention implementations that take a 4-D additive mask


class ModelError(BaerError):
    """A model directory that cannot be used as a judge (missing, unsafe weights, no template)."""


@dataclass
class LoadedModel:
    model: object            # transformers *ForCausalLM, eval mode
    tokenizer: object        # PreTrainedTokenizerFast with a chat template
    path: str
    cache_arg: str           # "cache" (transformers >= 5.24) or "past_key_values"
    context_len: int         # max positions the model accepts
    kv_bytes_per_token: int  # K+V over all layers for one token
    windows: dict = field(default_factory=lambda: {"full_attention": None})   # layer type -> sliding window
    logit_scale: float = 1.0             # the model's logits = softcap(scale x LM head(h)), as its forward
    logit_softcap: float | None = None   # computes them (logit_map; readout.read_model applies both)
    kv_dims: tuple = ()                  # ((K heads, K dim), (V heads, V dim)) of every layer's cache, as
                                         # probed at load (MLA caches differ from the config); () = config's
    tree_probe_err: float | None = None  # the load-time tree probe's max |log-prob difference| (probes.py)

    def kv_shape(self) -> tuple[tuple[int, int], tuple[int, int]]:
        """((K heads, K dim), (V heads, V dim)) per token of one layer's cache."""
        return self.kv_dims or config_kv_dims(self.model.config)

    @property
    def device(self):
        return next(self.model.parameters()).device

    @property
    def dtype(self):
        return next(self.model.parameters()).dtype

    @property
    def base(self):
        """The decoder stack whose output is the final normed hidden state."""
        return self.model.base_model

    @property
    def name(self) -> str:
        return os.path.basename(os.path.normpath(self.path))

    def hidden(self, ids, pos=None, mask=None, cache=None, groups=None):
        """Final normed hidden states [b, q, H] of new tokens `ids` [b, q] at positions `pos`
        after the cache's past (no cache: a plain causal forward).

        `mask` is a 4-D additive mask (the engine's tree rows, the decoder's slots). flash-attn 2
        takes none (transformers reads its mask as 2-D padding), so on a model loaded with it a
        masked call runs on SDPA (eager for soft-capped scores), same weights and cache; unmasked
        calls keep flash-attn 2. `groups` (width_groups.plan of a masked call): rows attend in
        those slot ranges, each over its own width, where the masked call runs on SDPA
        (`splits_attention`); elsewhere they are ignored (every row over the whole width).
        """
        import contextlib
        cfg = self.base.config
        impl = cfg._attn_implementation
        use, split = self.masked_attention() if mask is not None else impl, contextlib.nullcontext()
        if groups is not None and use == "sdpa":
            from baer_fast.runtime.plan import width_groups
            use, split = width_groups.register(), width_groups.grouped(groups)
        if use != impl:
            cfg._attn_implementation = use
        try:
            kw = {self.cache_arg: cache, "use_cache": True} if cache is not None else {"use_cache": False}
            with split:
                return self.base(input_ids=ids, attention_mask=mask, position_ids=pos, **kw).last_hidden_state
        finally:
            if use != impl:
                cfg._attn_implementation = impl

    def masked_attention(self) -> str:
        """The attention implementation a call with a 4-D mask runs on: the model's own where it
        takes one, else eager where SDPA cannot soft-cap the scores (Gemma 2), else SDPA."""
        impl = self.base.config._attn_implementation
        if impl in MASK_ATTENTION:
            return impl
        return "eager" if _softcaps_attention(self.base.config) else "sdpa"

    @property
    def splits_attention(self) -> bool:
        """Whether masked calls honour width groups (hidden's `groups`)."""
        return self.masked_attention() == "sdpa"


def check_kernels_not_shadowed() -> None:
    """Refuse, with a line that says why, to load a model where `import kernels` finds this
    checkout's own kernels/ folder (installed as `baer_fast.kernels`) while the Hub's `kernels`
    distribution is installed. That happens when the checkout's root is on sys.path (the
    working directory of `python -m ...` or `python -c`); transformers (>= 5.25 requires it)
    imports the Hub package when loading a model and would fail deep inside with an ImportError
    naming neither."""
    import importlib.util

    from transformers.utils.import_utils import is_kernels_available
    if not is_kernels_available():           # transformers' own test: a Hub `kernels` in its version range
        return
    spec = importlib.util.find_spec("kernels")
    folder = os.path.dirname(spec.origin) if spec is not None and spec.origin else None
    if folder and os.path.exists(os.path.join(folder, "choice_logits.py")):
        raise BaerError(f"`import kernels` finds this checkout's kernels/ folder ({folder}) instead of the "
                        "installed Hub `kernels` package that transformers loads; run from another "
                        "directory than the checkout's root (or with `python -P`)")


def cache_arg_name(forward) -> str:
    """transformers 5.24 renamed the forward argument `past_key_values` to `cache`."""
    params = inspect.signature(forward).parameters
    return "cache" if "cache" in params else "past_key_values"


DTYPES = {"float32": "float32", "fp32": "float32", "bfloat16": "bfloat16", "bf16": "bfloat16",
          "float16": "float16", "fp16": "float16", "float64": "float64"}   # float64: the tests' reference path
DTYPE_NAMES = ("auto",) + tuple(DTYPES)


def resolve_dtype(device: str, dtype: str):
    """The torch dtype a judge loads in on `device` ("auto": bf16 on CUDA, fp32 elsewhere)."""
    import torch
    if dtype == "auto":
        return torch.bfloat16 if device.startswith("cuda") else torch.float32
    if dtype not in DTYPES:
        raise InputError(f"unknown dtype {dtype!r} (choose from {', '.join(DTYPE_NAMES)})", field="dtype")
    return getattr(torch, DTYPES[dtype])


def text_config(config):
    return config.get_text_config() if hasattr(config, "get_text_config") else config


def _attn_impl(attn: str, config, name: str) -> str:
    if attn == "flash_attention_2":
        import importlib.util
        if importlib.util.find_spec("flash_attn") is None:
            raise ModelError("--attn flash_attention_2 was requested but flash-attn is not installed "
                             "(pip install 'baer-fast[gpu]')")
    if attn == "sdpa":
        from transformers import AutoModelForCausalLM
        try:
            cls = AutoModelForCausalLM._model_mapping[type(config)]
        except (KeyError, AttributeError):          # remote code, or a mapping this transformers lacks
            cls = None
        why = ("soft-caps its attention scores" if _softcaps_attention(config) else
               "has no SDPA attention in transformers" if cls is not None and not getattr(cls, "_supports_sdpa", True)
               else None)
        if why:
            log.warning("%s %s: using eager attention", name, why)
            return "eager"
    return attn


def _softcaps_attention(config) -> bool:
    """Gemma 2 caps attention scores (attn_logit_softcapping), which SDPA cannot."""
    return bool(getattr(text_config(config), "attn_logit_softcapping", None))


def free_bytes(device: str) -> int | None:
    """Memory a model loaded on `device` can still take: available RAM on CPU; on a CUDA device
    its free memory plus what this process's caching allocator holds unused (a trainer in the
    same process keeps freed blocks reserved, and the judge's weights can take them); None where
    unknown."""
    import torch
    if device == "cpu":
        try:
            import psutil
        except ImportError:          # an image without it (a dependency here): skip the check
            return None
        return int(psutil.virtual_memory().available)
    if device.startswith("cuda") and torch.cuda.is_available():
        dev = torch.device(device)
        unused = torch.cuda.memory_reserved(dev) - torch.cuda.memory_allocated(dev)
        return int(torch.cuda.mem_get_info(dev)[0] + unused)
    return None


def check_fits(path: str, device: str, dtype, config=None) -> None:
    """Refuse, before loading, weights that cannot fit on `device` in `dtype` (an 8B model in
    fp32, CPU's default, takes 30 GiB): a clear error instead of the kernel's OOM killer. A
    quantized checkpoint (`quantization_config`: fp8, GPTQ, AWQ...) keeps its stored types, so
    its size on disk is the estimate."""
    quantized = config is not None and getattr(config, "quantization_config", None)
    need, free = (stored_bytes(path) if quantized else weight_elements(path) * dtype.itemsize), free_bytes(device)
    if free is None or need <= free:
        return
    gib = lambda x: f"{x / 2**30:.1f} GiB"     # noqa: E731
    hint = ("pass --dtype bfloat16 to halve it, or " if dtype.itemsize > 2 and not quantized else "") + \
        "free memory or use a machine with more"
    held = "as stored (quantized)" if quantized else "in " + str(dtype).replace("torch.", "")
    raise ModelError(f"{os.path.basename(os.path.normpath(path))}: its weights take {gib(need)} {held} "
                     f"but {device} has {gib(free)} available; {hint}")


def check_device(device: str) -> str:
    """The device a judge loads on ("auto": cuda when available, else cpu); an unknown name or a
    device this torch cannot use (cuda on a CPU-only build) is an InputError, not a torch traceback."""
    import torch

    if device in (None, "auto"):
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise InputError(f"unknown device {device!r} (e.g. auto, cpu, cuda, cuda:1)", field="--device") from None
    backend = getattr(torch, dev.type, None)           # torch.cuda, torch.mps, torch.xpu, ...
    if dev.type != "cpu" and not (hasattr(backend, "is_available") and backend.is_available()):
        raise InputError(f"no {dev.type} device here (torch {torch.__version__}); use --device cpu or auto",
                         field="--device")
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise InputError(f"cuda:{dev.index} does not exist ({torch.cuda.device_count()} CUDA devices)",
                         field="--device")
    return device


def load_model(path: str, *, device: str = "auto", dtype: str = "auto", attn: str = "sdpa",
               trust_remote_code: bool = False) -> LoadedModel:
    check_kernels_not_shadowed()
    from transformers import AutoModelForCausalLM

    check_model_dir(path)
    device = check_device(device)
    tok, config = _tokenizer_and_config(path, trust_remote_code)
    windows = attention_windows(config)             # unsupported layer types: refused before the weights load
    torch_dtype, name = resolve_dtype(device, dtype), os.path.basename(os.path.normpath(path))
    check_fits(path, device, torch_dtype, config)
    model = AutoModelForCausalLM.from_pretrained(
        path, local_files_only=True, trust_remote_code=trust_remote_code, use_safetensors=True,
        dtype=torch_dtype, attn_implementation=_attn_impl(attn, config, name)).to(device).eval()
    cache_arg = cache_arg_name(model.base_model.forward)
    logits, hidden, kv_dims = _probe(model, cache_arg)
    loaded = LoadedModel(model, tok, path, cache_arg, _context_len(model.config, name),
                         _kv_bytes_per_token(model, kv_dims), windows, *logit_map(model, logits, hidden), kv_dims)
    return loaded


def _tokenizer_and_config(path: str, trust_remote_code: bool):
    config = read_config(path, trust_remote_code=trust_remote_code)    # before the tokenizer, which reads it too
    tok = read_tokenizer(path, trust_remote_code=trust_remote_code)
    if not getattr(tok, "chat_template", None):
        raise InputError("the tokenizer has no chat template; judge prompts are rendered with the "
                         "model's own template — use an instruction-tuned model", path=path)
    return tok, config


def tokenizer_and_context(path: str, *, trust_remote_code: bool = False):
    """(tokenizer, context length, name) of a model folder, without its weights: what cutting
    pairs to the context needs before the engine opens."""
    check_model_dir(path)
    tok, config = _tokenizer_and_config(path, trust_remote_code)
    name = os.path.basename(os.path.normpath(path))
    return tok, _context_len(config, name), name


PROBE = 8      # tokens of the load-time probe forward


def _probe(model, cache_arg: str):
    """One short forward of the whole model with a fresh cache -> (its logits and the base model's
    final normed hidden states at the last two positions, ((K heads, K dim), (V heads, V dim)) of
    the cache's layers). The hidden states come from a hook on the base model inside the same
    forward. A model whose layers cache differently shaped KV is refused (the engine holds all
    layers in one tensor)."""
    import torch
    from transformers import DynamicCache

    from baer_fast.runtime.model.kv import layer_kv
    ids = torch.arange(1, PROBE + 1, device=next(model.parameters()).device)[None]
    ids = ids % model.get_input_embeddings().num_embeddings
    cache, seen = DynamicCache(), []
    hook = model.base_model.register_forward_hook(lambda module, args, out: seen.append(out.last_hidden_state))
    try:
        with torch.inference_mode():
            logits = model(input_ids=ids, use_cache=True, **{cache_arg: cache}).logits
        if not seen:                # a forward that bypasses its base model's (OPT calls model.decoder)
            with torch.inference_mode():
                seen.append(model.base_model(input_ids=ids, use_cache=False).last_hidden_state)
    finally:
        hook.remove()
    layers = len(cache.layers) if hasattr(cache, "layers") else len(cache.key_cache)
    dims = {tuple((t.shape[1], t.shape[3]) for t in layer_kv(cache, i)) for i in range(layers)}
    if len(dims) != 1:
        raise ModelError(f"{type(model).__name__}: its layers cache differently shaped keys/values {sorted(dims)}; "
                         f"the hf engine holds every layer's KV in one tensor (try --backend vllm)")
    return logits[0, -2:].float(), seen[-1][0, -2:], dims.pop()


def logit_map(model, logits, hidden) -> tuple[float, float | None]:
    """(scale, soft-cap) between the LM head applied to the final normed hidden state, which the
    readout and the decoder compute, and the logits the model's own forward returns: a logit
    scale (Cohere `logit_scale`, Granite 1 / `logits_scaling`) and a final soft-cap (Gemma 2
    `final_logit_softcapping`) from the config, then checked on the load probe (_probe): the
    model's `logits` against its base model's final `hidden` states through the head and the map
    at the same positions. A model whose forward does anything else to its logits is refused
    (its verdicts would not be its own)."""
    import torch

    from baer_fast.runtime.model.readout import model_logits
    cfg = text_config(model.config)
    scale = float(getattr(cfg, "logit_scale", None) or 1.0) / float(getattr(cfg, "logits_scaling", None) or 1.0)
    cap = getattr(cfg, "final_logit_softcapping", None)
    cap = float(cap) if cap else None
    with torch.inference_mode():
        theirs, ours = logits, model_logits(_ProbeModel(model, scale, cap), hidden)
    err, size = float((theirs - ours).abs().max()), float(theirs.abs().max())
    # non-finite weights: left to the runtime, which names the pairs whose verdicts are not finite
    if bool(torch.isfinite(theirs).all()) and not err <= 1e-2 * size + 1e-4:
        raise ModelError(f"{type(model).__name__}: its forward changes the logits after the LM head in a way "
                         f"baer-fast does not know (max difference {err:.3g} on a probe, logits up to {size:.3g}); "
                         f"the constrained readout would not be the model's own distribution")
    return scale, cap


@dataclass
class _ProbeModel:            # what readout.model_logits reads of a LoadedModel
    model: object
    logit_scale: float
    logit_softcap: float | None


def attention_windows(config) -> dict:
    """{layer type: sliding window in tokens, or None for full causal attention} over the model's
    layers, from its config (`layer_types`, `sliding_window`, `use_sliding_window`)."""
    cfg = text_config(config)
    window = getattr(cfg, "sliding_window", None)
    if getattr(cfg, "use_sliding_window", True) is False:
        window = None
    types = getattr(cfg, "layer_types", None)
    if not types:
        return {"full_attention" if window is None else "sliding_attention": window}
    out = {}
    for t in types:
        if t not in ("full_attention", "sliding_attention"):
            raise ModelError(f"layers of type {t!r} are not supported by the hf engine (full and sliding-window "
                             f"attention are); try --backend vllm")
        out[t] = window if t == "sliding_attention" else None
    return out


def _context_len(config, name: str = "the model") -> int:
    """Positions a prompt plus its generation may take. A rotary embedding whose frequencies
    depend on the longest position of the call (longrope: Phi-3/3.5/4-mini; dynamic NTK) changes
    them past its original length, for every token of the call: a shared prefix computed in one
    call could then not equal the same tokens in a plain forward of a longer prompt. Up to that
    length the frequencies are fixed, so prompts are held to it (the context-window error)."""
    cfg = text_config(config)
    limit = int(getattr(cfg, "max_position_embeddings", 0) or 1 << 30)
    original, kind = _dynamic_rope_limit(cfg)
    if original is not None and original < limit:
        log.warning("the rotary frequencies of %s change past %d positions (%s rope); prompts are held to %d "
                    "tokens so shared prefixes stay exact", name, original, kind, original)
        return original
    return limit


def _dynamic_rope_limit(cfg) -> tuple[int | None, str]:
    """(the original length past which a longrope or dynamic rotary embedding changes its
    frequencies, its type); (None, "") for a static one (default, linear, llama3, yarn...)."""
    params = getattr(cfg, "rope_parameters", None) or getattr(cfg, "rope_scaling", None) or {}
    per_type = params and all(isinstance(v, dict) for v in params.values())
    found = []
    for p in (params.values() if per_type else [params]):
        kind = str(p.get("rope_type") or p.get("type") or "")
        original = (p.get("original_max_position_embeddings") or getattr(cfg, "original_max_position_embeddings", None)
                    or getattr(cfg, "max_position_embeddings", None))
        if (kind == "longrope" or "dynamic" in kind) and original:
            found.append((int(original), kind))
    return min(found) if found else (None, "")


def config_kv_dims(config) -> tuple[tuple[int, int], tuple[int, int]]:
    """((K heads, K dim), (V heads, V dim)) as the config states them (K and V alike)."""
    cfg = text_config(config)
    heads = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
    dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    return (heads, dim), (heads, dim)


def _kv_bytes_per_token(model, kv_dims=()) -> int:
    """K+V bytes of one token over all layers: from the probed cache shapes, else the config."""
    (hk, dk), (hv, dv) = kv_dims or config_kv_dims(model.config)
    return text_config(model.config).num_hidden_layers * (hk * dk + hv * dv) * next(model.parameters()).element_size()
