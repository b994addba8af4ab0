"""The server's settings: one frozen dataclass, the single source of defaults."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ServeConfig:
    host: str = "127.0.0.1"            # loopback unless told otherwise
    port: int = 8000
    api_key: str | None = None         # when set, every endpoint but /health needs "Authorization: Bearer <key>"
    max_batch_pairs: int = 256         # pairs merged into one engine call (a larger request runs alone)
    max_wait_ms: float = 10.0          # how long the first request of a batch waits for batch-mates
    max_queue: int = 1024              # requests waiting for the engine; one more is answered 503
    max_body_bytes: int = 32 * 2**20   # larger request bodies are answered 413
    body_timeout_s: float = 60.0       # a body not whole this long after its headers is answered 408 (slow clients)
    max_request_pairs: int = 4096      # pairs (or completions) in one request; more is a 422
    reward_method: str = "mean_win"    # /get_reward default: mean_win | bradley_terry
    drain_s: float = 120.0             # after SIGTERM, how long in-flight requests may take to finish
    retry_after_s: int = 1             # Retry-After of a 503

    def __post_init__(self):
        for name in ("max_batch_pairs", "max_queue", "max_body_bytes", "max_request_pairs"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if not self.body_timeout_s > 0:
            raise ValueError("body_timeout_s must be above 0")
        if self.max_wait_ms < 0:
            raise ValueError("max_wait_ms must be >= 0")
