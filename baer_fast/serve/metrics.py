"""Prometheus metrics of the server (prometheus_client, one registry per app)."""
from __future__ import annotations

import time
from collections import deque

PAIR_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096)
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
WINDOW_S = 60.0      # pairs/s is measured over the batches finished in this window


class Metrics:
    def __init__(self):
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = r = CollectorRegistry()
        self.queue_depth = Gauge("baer_queue_depth", "requests waiting for the engine", registry=r)
        self.pairs = Counter("baer_pairs", "pairs judged", registry=r)
        self.pairs_per_s = Gauge("baer_pairs_per_second", f"pairs judged per second over the last {WINDOW_S:.0f} s",
                                 registry=r)
        self.batch_pairs = Histogram("baer_batch_pairs", "pairs per engine call", buckets=PAIR_BUCKETS, registry=r)
        self.batch_requests = Histogram("baer_batch_requests", "requests merged into one engine call",
                                        buckets=PAIR_BUCKETS, registry=r)
        self.batch_seconds = Histogram("baer_batch_seconds", "engine seconds per call", buckets=LATENCY_BUCKETS,
                                       registry=r)
        self.latency = Histogram("baer_request_latency_seconds", "request latency (arrival to answer)",
                                 ["endpoint"], buckets=LATENCY_BUCKETS, registry=r)
        self.requests = Counter("baer_requests", "requests answered", ["endpoint", "status"], registry=r)
        self.in_flight_gauge = Gauge("baer_requests_in_flight", "judge requests taken and not yet answered",
                                     registry=r)
        self.abandoned = Counter("baer_abandoned_requests", "judge requests whose client hung up before the answer",
                                 registry=r)
        self.body_timeouts = Counter("baer_body_timeouts", "requests answered 408: the body did not arrive within "
                                     "body_timeout_s of the headers", registry=r)
        self.dropped_pairs = Counter("baer_dropped_pairs", "pairs never judged: their client hung up while they "
                                     "waited", registry=r)
        self.in_flight = 0
        self._recent: deque = deque()          # (finish time, pairs)

    def batch_done(self, n_pairs: int, n_requests: int, seconds: float) -> None:
        self.pairs.inc(n_pairs)
        self.batch_pairs.observe(n_pairs)
        self.batch_requests.observe(n_requests)
        self.batch_seconds.observe(seconds)
        now = time.monotonic()
        self._recent.append((now, n_pairs))
        while self._recent and self._recent[0][0] < now - WINDOW_S:
            self._recent.popleft()
        self.pairs_per_s.set(sum(n for _, n in self._recent) / WINDOW_S)

    def taken(self, delta: int) -> None:
        self.in_flight += delta
        self.in_flight_gauge.set(self.in_flight)

    def answered(self, endpoint: str, status: int, seconds: float) -> None:
        self.requests.labels(endpoint=endpoint, status=str(status)).inc()
        self.latency.labels(endpoint=endpoint).observe(seconds)

    def render(self) -> tuple[bytes, str]:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
