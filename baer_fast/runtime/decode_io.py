"""What goes in and out of the decoder: requests, results, counters. Plain data, no torch."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GenRequest:
    prompt: tuple[int, ...]           # token ids of the full rendered prompt
    max_new_tokens: int               # budget for each sample
    samples: int = 1                  # rows decoded from this prompt's one prefill
    temperature: float = 0.0          # 0 = greedy
    top_p: float = 1.0
    seeds: tuple[int, ...] = ()       # one per sample when sampling (ignored when greedy)
    stop: tuple[str, ...] = ()        # stop strings, matched on the decoded generation
    cue: tuple[int, ...] = ()         # with choices: fed after the kept generation (EOS/stop trimmed)...
    choices: tuple[int, ...] = ()     # ...then log-softmax over these ids is read (GenResult.verdicts)

    def __post_init__(self):
        if self.max_new_tokens < 0 or self.samples < 1 or not self.prompt:
            raise ValueError("a generation request needs a prompt, max_new_tokens >= 0 and samples >= 1")
        if self.reads_prompt:
            if not self.choices or self.cue or self.samples != 1:
                raise ValueError("a prompt read (max_new_tokens 0) needs choices, no cue and one sample")
        elif self.choices and not self.cue:
            raise ValueError("a verdict read after the generation needs a non-empty cue")
        if self.temperature > 0 and len(self.seeds) != self.samples:
            raise ValueError("a sampled request needs one seed per sample")

    @property
    def reads_prompt(self) -> bool:
        """Nothing generated: the verdict over `choices` is read at the prompt's last position by
        the prefill that computes it, whose prompt tree the generations entering with it share."""
        return self.max_new_tokens == 0


@dataclass
class GenResult:
    tokens: list[tuple[int, ...]]     # per sample: generated ids (the stop/EOS token included)
    finish: list[str]                 # per sample: "eos" | "stop" | "length" | "read" (a prompt read)
    seconds: float = 0.0              # this request's share of prefill and decode time
    verdicts: list | None = None      # per sample: log-probs over `choices` after the cue (if asked)


@dataclass
class DecodeStats:
    tokens_prefilled: int = 0
    scores_prefilled: int = 0         # attention scores the prefill forwards computed (queries.py)
    tokens_decoded: int = 0           # generated tokens, every sample counted
    scores_decoded: int = 0           # attention scores the decode steps computed: every row over its group's widest
    scores_decoded_own: int = 0       # ...of which each row's own context (the rest is masked padding)
    sorts: int = 0                    # slot reorders by length (each copies every active row's KV once)
    steps: int = 0                    # batched decode forwards
    prefills: int = 0                 # prefill forwards
    rows_peak: int = 0
    kv_bytes_peak: int = 0            # slot buffers allocated (K and V, every layer) at most
    reserve_bytes: int = 0            # what the budget kept aside for activations and exported KV
    tokens_cue: int = 0               # tokens fed after generations to read verdicts
    seconds: float = 0.0
    step_seconds: float = 0.0         # decode steps, all of it (forward, sampling, stop checks, retiring)
    step_forward_seconds: float = 0.0  # ...of which the model forward and the LM head
    blocks: int = 0                   # host reads of the chosen ids (decode_step.Blocks: every check_every steps)
    block_host_seconds: float = 0.0   # ...reading them, stop rules, retiring (verdict reads after cues included)
    cue_seconds: float = 0.0          # verdict reads after cues (model forwards over the cues); in step_seconds but
                                      # for a row whose first token ends it (read during its prefill)
    tokens_overshoot: int = 0         # row-steps computed after the row's finish inside its block (dropped)
