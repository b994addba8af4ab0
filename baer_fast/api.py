"""In-process judge for reward loops: texts in, signed antisymmetric scores out.

    judge = Judge.from_pretrained("path/to/judge-model", head="head.json")
    s = judge.score(questions, responses_a, responses_b)      # torch.float64 [N]

Without `head`: the label-free default head (heads/default.py: the mean of z~ over direct and
score), so a reward loop can start before any pair is labelled.

Inputs are lists with one entry per pair: responses are strings, a question is a string or
a conversation ({role, content} messages ending with the user's); anything else (a bare
string for a list, bytes, None) is an InputError naming the argument and index. The model
stays resident; the same inputs give the same scores. Every pair gets a score: text that is
not valid UTF-8 is repaired and over-long pairs are cut symmetrically (bank/truncation.py).
Threads calling at once run one at a time on a model (`model_lock`). No files but the head's.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import threading
from dataclasses import dataclass
from typing import Sequence

from baer_fast.errors import ArtifactError, BaerError, InputError, PromptTooLong

log = logging.getLogger("baer_fast")
BACKENDS = ("hf", "vllm")
# an explicit request fails loudly: vLLM's prefix cache reuses KV computed beside other pairs
NOT_INVARIANT_ON_VLLM = "batch_invariant=True needs backend='hf' (vLLM reuses prefix KV across calls)"


@dataclass(frozen=True)
class JudgeOptions:
    kernels: str = "auto"          # constrained-readout implementation: auto | triton | torch
    device: str | None = None      # None = cuda when available, else cpu
    dtype: str = "auto"            # auto = bf16 on CUDA, fp32 on CPU
    truncate: bool = True          # cut over-long pairs symmetrically instead of raising
    batch_invariant: bool | None = None   # each distinct pair in calls of its own (its score the same bits in
                                          # any batch); None: on when the head has a sampled expert, whose
                                          # draws batch rounding can change, never on vLLM (Judge.invariant)
    generation: object = None      # bank.generative.GenerationConfig of the head's generative experts
                                   # (budgets, seed); None: those the head records (its signals' settings),
                                   # else each protocol's budget, seed 0
    decoder_bytes: int | None = None   # the decoder's slot memory, over the generation config's (from_pretrained:
                                       # memory_gb's, the engine's budget, as --memory-gb sets both); None: its own


class Judge:
    # how a caller with truncate=False makes over-long pairs fit (serve says it in its own terms)
    truncate_fix = "pass truncate=True (Judge.from_pretrained)"

    def __init__(self, engine, art: dict, *, options: JudgeOptions = JudgeOptions()):
        from baer_fast import artifact as artifact_io
        from baer_fast import protocols

        if options.batch_invariant and getattr(engine, "kind", None) == "vllm":
            raise BaerError(NOT_INVARIANT_ON_VLLM)
        self.engine, self.art, self.options = engine, art, options
        self.head = artifact_io.deployed_head(art)
        protocols.check_runnable(art["experts"], f"the {type(engine).__name__}")
        self.experts = list(art["experts"])
        if options.generation is None and art.get("generation"):    # as the head's signals were made
            from baer_fast.bank.generative import GenerationConfig, recorded_budgets_seed
            budgets, seed = recorded_budgets_seed(art["generation"])
            self.options = options = dataclasses.replace(options, generation=GenerationConfig(
                max_new_tokens=budgets, seed=seed))
        if options.decoder_bytes is not None:
            from baer_fast.bank.generative import GenerationConfig
            self.options = options = dataclasses.replace(options, generation=dataclasses.replace(
                options.generation or GenerationConfig(), memory_budget_bytes=options.decoder_bytes))
        self.derived_params = dict(art.get("derived_params") or {})
        missing = [e for e in self.experts if e in protocols.DERIVED_EXPERTS and e not in self.derived_params]
        if missing:
            raise InputError(f"derived expert {missing[0]!r} has no frozen parameters in the head "
                             "artifact ('derived_params'); refit the head from `baer-fast experts` output",
                             field="derived_params")
        self._room = None
        self._warned_unpruned = False
        self._lock = model_lock(engine)
        self.last_cascade = None       # the last call's early-exit report (a cascade head; None before one
                                       # and after a call that raised)

    @classmethod
    def from_pretrained(cls, model_path, head=None, *, backend: str = "hf", kernels: str = "auto",
                        device: str | None = None, dtype="auto", truncate: bool = True,
                        vllm_options=None, batch_invariant: bool | None = None, generation=None,
                        memory_gb: float | None = None) -> "Judge":
        """head: a path (str or os.PathLike) to a head artifact, an already loaded artifact dict, or
        None for the label-free default head (`artifact.default_artifact()`, recorded as head "default").
        dtype: one of runtime.model.load.DTYPE_NAMES or a torch dtype (torch.bfloat16). kernels="triton"
        without a GPU raises here (kernels.dispatch), not at the first score.

        vllm_options (backend="vllm" only): a `VllmOptions` or a dict of its fields, e.g.
        `{"data_parallel_size": 2, "tensor_parallel_size": 4}`; `dtype` overrides its dtype
        unless left "auto". Data parallel ranks are spawned processes: call from under an
        `if __name__ == "__main__":` guard. batch_invariant: JudgeOptions.batch_invariant.
        generation: a `baer_fast.bank.generative.GenerationConfig` (generative experts' token budgets
        and seed; None: those the head records, else each protocol's budget, seed 0), as
        `experts --max-new-tokens/--seed` set them.
        memory_gb (backend="hf"): --memory-gb's one budget, in GiB, for the engine's KV and activations
        and for the decoder's slots (over `generation`'s memory_budget_bytes); None: the command line's
        default for both, the decoder keeping a `generation` passed in as it is.
        """
        from baer_fast.runtime.config import EngineConfig, memory_bytes
        from baer_fast.runtime.open import HfOptions, open_engine, open_vllm

        if backend not in BACKENDS:
            raise BaerError(f"unknown backend {backend!r} (choose from {', '.join(BACKENDS)})")
        model_path, dtype = os.fspath(model_path), dtype_name(dtype, check=backend == "hf")
        if backend == "vllm":
            import dataclasses

            from baer_fast.runtime.vllm.backend import VllmOptions, require_vllm
            require_vllm()                     # says how to install it before anything loads
            if batch_invariant:
                raise BaerError(NOT_INVARIANT_ON_VLLM)
            if memory_gb is not None:
                raise BaerError("memory_gb applies to backend='hf'; vLLM takes a share of the GPU: "
                                "vllm_options={'gpu_memory_utilization': ...}")
            opts = VllmOptions(**vllm_options) if isinstance(vllm_options, dict) else (vllm_options or VllmOptions())
            if dtype != "auto":
                opts = dataclasses.replace(opts, dtype=dtype)
            art = head_artifact(head)
            options = JudgeOptions(kernels=kernels, device=device, dtype=opts.dtype, truncate=truncate,
                                   batch_invariant=batch_invariant, generation=generation)
            return cls(open_vllm(model_path, opts), art, options=options)
        if vllm_options is not None:
            raise BaerError("vllm_options apply to backend='vllm' only")
        budget = EngineConfig().memory_budget_bytes if memory_gb is None else memory_bytes(memory_gb, field="memory_gb")
        art = head_artifact(head)
        check_kernels(kernels, device)
        options = JudgeOptions(kernels=kernels, device=device, dtype=dtype, truncate=truncate,
                               batch_invariant=batch_invariant, generation=generation,
                               decoder_bytes=None if memory_gb is None and generation is not None else budget)
        engine = open_engine(model_path, options=HfOptions(engine=EngineConfig(memory_budget_bytes=budget,
                                                                               kernels=kernels),
                                                           device=device or "auto", dtype=dtype))
        return cls(engine, art, options=options)

    @property
    def invariant(self) -> bool:
        """Whether batches run each distinct pair in calls of its own (docs/protocols.md): as asked,
        else on exactly when the head has a sampled expert (self_consistency) and the engine is hf."""
        asked = self.options.batch_invariant
        if asked is not None:
            return asked
        from baer_fast import protocols
        return self.engine.kind != "vllm" and any(
            e in protocols.GENERATIVE and protocols.get(e).TEMPERATURE > 0 for e in self.experts)

    # ------------------------------------------------------------------ inputs

    def room(self) -> int:
        """Tokens left for question + responses in every prompt of the head's experts (bank/truncation.room_for)."""
        if self._room is None:
            from baer_fast.bank.truncation import cut_room

            loaded = self.engine.loaded
            self._room = cut_room(loaded.tokenizer, loaded.context_len, self.experts, self.options.generation,
                                  name=loaded.name)
        return self._room

    def pairs(self, questions: Sequence[str], responses_a: Sequence[str], responses_b: Sequence[str], *,
              subsets=None, categories=None) -> list:
        """Pairs of the inputs (checked by `batch_inputs`). subsets / categories: one string for every pair or one per pair (None:
        subset "default", no category); they select a per-subset head's experts and the stack's
        interaction blocks, as a pairs file's `subset` and `category` fields do."""
        from baer_fast.bank.truncation import fit_pair, sanitize
        from baer_fast.io.records import Pair, per_pair

        questions, responses_a, responses_b = batch_inputs(questions, responses_a, responses_b)
        subs = per_pair(subsets, len(questions), "subsets", "default")
        cats = per_pair(categories, len(questions), "categories", None)
        out = []
        for i, (q, a, b) in enumerate(zip(questions, responses_a, responses_b)):
            if self.options.truncate:
                cut = fit_pair(self.engine.loaded.tokenizer, q, a, b, room=self.room())
                q, a, b = cut.question, cut.response_a, cut.response_b
            else:
                q = sanitize(q) if isinstance(q, str) else tuple((r, sanitize(c)) for r, c in q)
                a, b = sanitize(a), sanitize(b)
            out.append(Pair(f"judge-{i}", q, a, b, subset=subs[i], split="test", category=cats[i]))
        return out

    # ------------------------------------------------------------------ outputs

    def signals(self, questions, responses_a, responses_b, *, subsets=None, categories=None) -> list:
        """The expert runs of each pair (for auditing), as Signals records."""
        with self._lock:              # one call at a time on the model, whatever thread calls
            return self._signals(questions, responses_a, responses_b, subsets=subsets, categories=categories)

    def _signals(self, questions, responses_a, responses_b, *, subsets, categories) -> list:
        if self.art.get("cascade"):         # a call that raises leaves no report, not the call before's
            self.last_cascade = None
        pairs = self.pairs(questions, responses_a, responses_b, subsets=subsets, categories=categories)
        if not pairs:
            if self.art.get("cascade"):
                from baer_fast.selection.cascade import staged_report
                self.last_cascade = staged_report([], [])
            return []
        try:
            return self._run(pairs)
        except PromptTooLong as e:     # the encoder names the CLI's option; this caller sets truncate=
            if self.options.truncate:
                raise
            index = (e.pair_id or "").removeprefix("judge-")          # Judge.pairs names pair i judge-i
            raise e.with_fix(self.truncate_fix, where=f"{index} (0-based) of the call" if index.isdigit() else None
                             ) from None

    def _run(self, pairs) -> list:
        from baer_fast.bank.runner import run_experts

        def bank(some, experts, given=None):
            return run_experts(self.engine, some, experts=experts, derived_params=self.derived_params,
                               generation=self.options.generation, batch_invariant=self.invariant, given=given)
        if self.art.get("allocation") is not None:   # pruned per subset: each pair runs its subset's experts
            from baer_fast.selection.allocation import run_allocated
            self._warn_unpruned(pairs)
            return run_allocated(self.art, pairs, lambda some, names, _k: bank(some, names))
        if self.art.get("cascade"):      # early exit: stage 2 only for the pairs stage 1 leaves open
            from baer_fast.bank.prefix_store import keeping, worth_keeping
            from baer_fast.bank.runner import free_sources, stage_experts
            from baer_fast.selection.cascade import run_staged, stage1_run
            first, _, second = stage_experts(stage1_run(self.art, free_sources), self.experts,
                                             self.art["cascade"]["stage1_experts"])
            # stage 2 reads the open pairs' prompt prefixes stage 1 computed (not batch-invariant:
            # their last bits are stage 1's call's), where both stages run through the prefix engine
            keep = None if self.invariant or not worth_keeping(first, second) else lambda: keeping(self.engine)
            records, self.last_cascade = run_staged(self.art, pairs, bank, free_sources, keep)
            return records
        return bank(pairs, self.experts)

    def _warn_unpruned(self, pairs) -> None:
        """Once per Judge: pairs whose subset the head was not pruned for run every expert it chose."""
        from baer_fast.selection.allocation import unpruned_note
        note = None if self._warned_unpruned else unpruned_note(self.art, pairs)
        if note:
            self._warned_unpruned = True
            log.warning("%s; pass subsets= to run only a subset's experts", note)

    def score(self, questions, responses_a, responses_b, *, subsets=None, categories=None):
        """Signed scores [N] (float64): > 0 means response a is better; swapping a/b negates it."""
        import torch

        records = self.signals(questions, responses_a, responses_b, subsets=subsets, categories=categories)
        if not records:
            return torch.zeros(0, dtype=torch.float64)
        return torch.as_tensor(self.head.score(records), dtype=torch.float64)

    def prob_a(self, questions, responses_a, responses_b, *, subsets=None, categories=None):
        """P(a better) = sigmoid(score), [N] float64."""
        return torch_sigmoid(self.score(questions, responses_a, responses_b, subsets=subsets, categories=categories))

    def results(self, questions, responses_a, responses_b, *, subsets=None, categories=None) -> list[dict]:
        """Score records ({"score", "p_a", "winner", "head", "expert", ...}, scoring.py), one per pair."""
        from baer_fast.scoring import score_records

        records = self.signals(questions, responses_a, responses_b, subsets=subsets, categories=categories)
        return score_records(self.art, records, self.head) if records else []


_LOCKS_GUARD = threading.Lock()


def model_lock(engine) -> threading.RLock:
    """The one lock of the model under `engine` (shared by every Judge on it). A forward switches
    the model config's attention implementation for its call (runtime/model/load.py `hidden`,
    runtime/decode_kernel.py) and engines keep state between calls, so two threads judging on one
    model at once could run each other's attention: a KeyError mid-forward, or a silent and
    permanent fall back to one width. Calls therefore run one at a time; batch pairs into one call
    (or `serve`, which merges requests) for throughput."""
    owner = getattr(engine, "loaded", engine)
    with _LOCKS_GUARD:
        lock = getattr(owner, "_baer_call_lock", None)
        if lock is None:
            lock = threading.RLock()
            object.__setattr__(owner, "_baer_call_lock", lock)
    return lock


def batch_inputs(questions, responses_a, responses_b) -> tuple[list, list, list]:
    """The per-pair arguments as lists of equal length: responses strings, questions strings or
    conversations (as (role, content) turns). InputError names the argument and index of a bad entry."""
    from baer_fast.io.records import as_conversation

    cols = {name: _per_pair_list(name, x) for name, x in
            (("questions", questions), ("responses_a", responses_a), ("responses_b", responses_b))}
    qs, a, b = cols.values()
    if not len(qs) == len(a) == len(b):
        raise InputError(f"questions, responses_a and responses_b differ in length ({len(qs)}, {len(a)}, {len(b)})")
    for name in ("responses_a", "responses_b"):
        bad = next((i for i, x in enumerate(cols[name]) if not isinstance(x, str)), None)
        if bad is not None:
            raise InputError(f"expected a string, got {type(cols[name][bad]).__name__}", field=f"{name}[{bad}]")
    out = []
    for i, q in enumerate(qs):
        if isinstance(q, (list, tuple)):
            try:
                q = as_conversation(q)
            except (ValueError, TypeError) as e:
                raise InputError(f"not a conversation: {e}", field=f"questions[{i}]") from None
        elif not isinstance(q, str):
            raise InputError(f"expected a string or a conversation (a list of {{role, content}} messages), "
                             f"got {type(q).__name__}", field=f"questions[{i}]")
        out.append(q)
    return out, a, b


def _per_pair_list(name: str, value) -> list:
    if isinstance(value, (str, bytes)):
        raise InputError(f"expected a list with one entry per pair, got a single {type(value).__name__} "
                         f"(for one pair, wrap it: [text])", field=name)
    try:
        return list(value)
    except TypeError:
        raise InputError(f"expected a list with one entry per pair, got {type(value).__name__}",
                         field=name) from None


def dtype_name(dtype, *, check: bool = True) -> str:
    """A dtype option as the loader's name: a torch dtype (torch.float32 -> "float32") or a name;
    with `check`, one of the loader's DTYPE_NAMES (else an InputError listing them)."""
    from baer_fast.runtime.model.load import DTYPE_NAMES

    name = dtype if isinstance(dtype, str) else str(dtype).removeprefix("torch.")
    if check and name not in DTYPE_NAMES:
        raise InputError(f"unknown dtype {dtype!r} (choose from {', '.join(DTYPE_NAMES)}, or the torch dtype "
                         "of one)", field="dtype")
    return name


def check_kernels(kernels: str, device: str | None) -> None:
    """An explicit `kernels` that cannot run here raises now (kernels.dispatch.resolve_kernels:
    "triton" without a CUDA device and Triton), not at the first score."""
    from baer_fast.kernels.dispatch import resolve_kernels
    if kernels == "triton":
        import torch
        auto = "cuda" if torch.cuda.is_available() else "cpu"
        resolve_kernels(kernels, auto if device in (None, "auto") else device)
    elif kernels != "auto":
        resolve_kernels(kernels)                 # "torch", or an unknown name: raises listing the choices


HEAD_FIELDS = {"head": str, "heads": dict, "experts": list}     # what Judge reads of an artifact


def head_artifact(head) -> dict:
    """A head artifact from a path (str or os.PathLike), a loaded dict, or None (the label-free
    default head). A dict is checked as a file is (the fields Judge reads), short of a checksum; a
    file's experts must be ones a local judge runs (checked before any model loads)."""
    from baer_fast import artifact as artifact_io
    from baer_fast import protocols
    if head is None:
        return artifact_io.default_artifact()
    if isinstance(head, (str, os.PathLike)):
        art = artifact_io.load(os.fspath(head))
        protocols.check_runnable(art["experts"], "a local judge model", os.fspath(head))
        return art
    if not isinstance(head, dict):
        raise InputError(f"expected a path to a head artifact, a loaded artifact dict or None, got "
                         f"{type(head).__name__}", field="head")
    try:
        artifact_io.check_fields(head, "head artifact dict", HEAD_FIELDS)
    except ArtifactError as e:
        raise ArtifactError(f"{e} (load a file with artifact.load, or pass the dict `fit_condition` returns)") from None
    protocols.check_runnable(head["experts"], "a local judge model")
    return head


def torch_sigmoid(x):
    import torch
    return torch.sigmoid(x)
