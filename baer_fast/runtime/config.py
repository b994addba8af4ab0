"""The runtime's configurations, each the single source of its component's defaults."""
from __future__ import annotations

from dataclasses import dataclass

from baer_fast.errors import InputError


class ConfigError(InputError, ValueError):
    """A configuration value out of range, named by the command-line flag that sets it (the CLI
    prints it as one line); still a ValueError for code that builds configs directly."""


@dataclass(frozen=True)
class EngineConfig:
    # Bytes the engine may use for KV held across tree levels plus one forward's activations;
    # batch sizes and tokens per forward are derived from it (never a fixed count).
    memory_budget_bytes: int = 2 << 30
    # Optional hard cap on padded new tokens per forward (CLI --batch-tokens); None = from budget.
    batch_tokens: int | None = None
    # Constrained-readout implementation: "auto" | "triton" | "torch" (see runtime/model/readout.py).
    kernels: str = "auto"
    # Share of the budget reserved for KV held between levels; the rest bounds one forward.
    kv_fraction: float = 0.5
    # Masked forwards over rows of different lengths attend in width groups (runtime/plan/width_groups.py).
    split_attention: bool = True

    def __post_init__(self):
        if self.memory_budget_bytes <= 0:
            raise ConfigError(f"must be more than 0 GiB (memory_budget_bytes={self.memory_budget_bytes})",
                              field="--memory-gb")
        if self.batch_tokens is not None and self.batch_tokens < 1:
            raise ConfigError(f"must be at least 1 (got {self.batch_tokens})", field="--batch-tokens")
        if self.kernels not in ("auto", "triton", "torch"):
            raise ConfigError(f"must be auto, triton or torch, not {self.kernels!r}", field="--kernels")
        if not 0.0 < self.kv_fraction < 1.0:
            raise ConfigError(f"must be in (0, 1), not {self.kv_fraction}", field="kv_fraction")

    @property
    def kv_budget_bytes(self) -> int:
        return int(self.memory_budget_bytes * self.kv_fraction)

    @property
    def activation_budget_bytes(self) -> int:
        return self.memory_budget_bytes - self.kv_budget_bytes


@dataclass(frozen=True)
class DecoderConfig:
    """decode.Decoder's defaults (bank.generative.GenerationConfig takes its budgets from here)."""
    max_rows: int = 256                       # decode rows in flight at most...
    memory_budget_bytes: int = 4 << 30        # ...and as many as this much slot KV holds
    prefill_tokens: int = 8192                # new tokens per prefill forward at most
    group_columns: int | None = None          # one more width group's cost (None: the device's)
    split_attention: bool = True              # decode steps attend in width groups
    # decode steps per host read of the chosen ids (EOS, stops; a row finished mid-block wastes the
    # rest of its block's steps). None: check_every_cuda on CUDA, 1 on CPU (no device sync to save there)
    check_every: int | None = None
    check_every_cuda: int = 8
    graphs: str = "auto"                      # "auto": CUDA graphs of the decode step where probed; "off"


DECODER = DecoderConfig()


def memory_bytes(gb, *, field: str = "--memory-gb") -> int:
    """--memory-gb (and `Judge.from_pretrained(memory_gb=)`) in bytes: one budget that the engine's
    KV and activations (EngineConfig) and the decoder's slots (GenerationConfig) each live within."""
    if isinstance(gb, bool) or not isinstance(gb, (int, float)) or not gb > 0:
        raise ConfigError(f"must be a number of GiB more than 0, not {gb!r}", field=field)
    return int(gb * 2**30)
