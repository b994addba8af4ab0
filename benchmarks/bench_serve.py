"""Judge server throughput and latency: `baer-fast serve` at 1, 8 and 32 concurrent clients
against the in-process Judge on the same pairs, in one run.

Workload: a random-weight tiny judge (tests/fixtures/tiny_models.py, default head: direct and
score, both orders); `--pairs` pairs whose questions come in groups of `--share` pairs (a reward
loop's completions of one prompt), sent as requests of `--per-request` pairs. In-process rows:
the whole set in one `Judge.score` call (the best batch there is) and one call per request
(what a caller without a server gets). Server rows: a real `baer-fast serve` subprocess on a
loopback port, each client a connection sending requests back to back; latency is per request
(send to answer), and the mean pairs per engine call is read from /metrics. Rounds interleave
the in-process and server rows; each figure is its median over the rounds.

    python benchmarks/bench_serve.py [--pairs 256] [--per-request 2] [--clients 1,8,32] [--rounds 3]

Never asserts; ends with one JSON line. Timings on a shared machine are noisy: note load_avg_1m.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.append(os.path.join(HERE, ".."))

WORDS = "the answer is correct because python code returns the sum of a list of numbers".split()


def workload(n_pairs: int, share: int, seed: int = 0) -> list[tuple[str, str, str]]:
    rng = random.Random(seed)

    def text(lo, hi):
        return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi)))
    out, q = [], ""
    for i in range(n_pairs):
        if i % share == 0:
            q = f"question {i}: " + text(20, 60) + "?"
        out.append((q, text(20, 120), text(20, 120)))
    return out


def requests_of(pairs, per_request: int) -> list[list]:
    return [pairs[i: i + per_request] for i in range(0, len(pairs), per_request)]


def percentiles(xs) -> dict:
    xs = sorted(xs)
    q = statistics.quantiles(xs, n=100, method="inclusive") if len(xs) > 1 else xs * 99
    return {"p50_ms": 1e3 * q[49], "p90_ms": 1e3 * q[89], "p99_ms": 1e3 * q[98], "max_ms": 1e3 * xs[-1]}


def open_judge(model_dir: str, reqs):
    from baer_fast.api import Judge
    judge = Judge.from_pretrained(model_dir, kernels="torch")
    judge.score(*zip(*reqs[0]))                                        # warm-up
    return judge


def in_process(judge, pairs, reqs) -> dict:
    t0 = time.perf_counter()
    judge.score(*zip(*pairs))
    whole = time.perf_counter() - t0
    lat = []
    t0 = time.perf_counter()
    for r in reqs:
        t = time.perf_counter()
        judge.score(*zip(*r))
        lat.append(time.perf_counter() - t)
    per_request = time.perf_counter() - t0
    return {"one_call": {"pairs_per_s": len(pairs) / whole},
            "one_call_per_request": {"pairs_per_s": len(pairs) / per_request, **percentiles(lat)}}


async def load(url: str, reqs, clients: int) -> tuple[float, list[float]]:
    import httpx
    todo, lat = list(reqs), []

    async def worker():
        async with httpx.AsyncClient(timeout=600) as c:
            while todo:
                r = todo.pop()
                body = {"pairs": [{"question": q, "response_a": a, "response_b": b} for q, a, b in r]}
                t = time.perf_counter()
                resp = await c.post(url + "/v1/judge", json=body)
                lat.append(time.perf_counter() - t)
                resp.raise_for_status()
    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(clients)))
    return time.perf_counter() - t0, lat


def batch_stats(url: str) -> tuple[float, float]:
    import httpx
    text = httpx.get(url + "/metrics").text
    get = {l.split()[0]: float(l.split()[-1]) for l in text.splitlines() if l.startswith("baer_batch_pairs_")}
    return get.get("baer_batch_pairs_sum", 0.0), get.get("baer_batch_pairs_count", 0.0)


def start_server(model_dir: str, args) -> tuple[subprocess.Popen, str]:
    import httpx
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "baer_fast.cli", "-q", "serve", "--model", model_dir, "--port", str(port),
           "--kernels", "torch", "--max-wait-ms", str(args.max_wait_ms), "--max-batch-pairs", str(args.max_batch_pairs)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    while True:
        if proc.poll() is not None:
            raise SystemExit(proc.stderr.read().decode())
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return proc, url
        except httpx.TransportError:
            time.sleep(0.2)


def served(url: str, reqs, *, n_pairs: int, clients: int) -> dict:
    s0, n0 = batch_stats(url)
    wall, lat = asyncio.run(load(url, reqs, clients))
    s1, n1 = batch_stats(url)
    return {"pairs_per_s": n_pairs / wall, **percentiles(lat), "mean_pairs_per_engine_call": (s1 - s0) / max(n1 - n0, 1)}


def median_row(rows: list[dict]) -> dict:
    """Field-wise median over rounds (each field's own median)."""
    return {k: statistics.median(r[k] for r in rows) for k in rows[0]}


def run_rounds(model_dir: str, pairs, reqs, args) -> tuple[dict, dict]:
    """Rounds interleave the in-process rows and the server rows, so load bursts hit both."""
    judge = open_judge(model_dir, reqs)
    proc, url = start_server(model_dir, args)
    local, remote = {"one_call": [], "one_call_per_request": []}, {str(c): [] for c in args.clients}
    try:
        asyncio.run(load(url, reqs[:2], 1))                              # warm-up
        for _ in range(args.rounds):
            for k, v in in_process(judge, pairs, reqs).items():
                local[k].append(v)
            for c in args.clients:
                remote[str(c)].append(served(url, reqs, n_pairs=len(pairs), clients=c))
    finally:
        proc.terminate()
        proc.wait(60)
    return {k: median_row(v) for k, v in local.items()}, {k: median_row(v) for k, v in remote.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=256)
    ap.add_argument("--per-request", type=int, default=2, help="pairs per request")
    ap.add_argument("--share", type=int, default=4, help="consecutive pairs sharing one question")
    ap.add_argument("--clients", default="1,8,32")
    ap.add_argument("--max-wait-ms", type=float, default=10.0)
    ap.add_argument("--max-batch-pairs", type=int, default=256)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3, help="medians over this many interleaved rounds")
    args = ap.parse_args(argv)
    args.clients = [int(x) for x in args.clients.split(",")]
    from tests.fixtures.tiny_models import build_model_dir

    pairs = workload(args.pairs, args.share)
    reqs = requests_of(pairs, args.per_request)
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = build_model_dir(os.path.join(tmp, "judge"), arch="qwen3", seed=1, layers=args.layers,
                                    hidden=args.hidden, intermediate=2 * args.hidden, max_pos=1024)
        local, remote = run_rounds(model_dir, pairs, reqs, args)
    print(f"in-process, one call:        {local['one_call']['pairs_per_s']:8.1f} pairs/s", file=sys.stderr)
    r = local["one_call_per_request"]
    print(f"in-process, call per request:{r['pairs_per_s']:8.1f} pairs/s  p50 {r['p50_ms']:.1f} ms  "
          f"p99 {r['p99_ms']:.1f} ms", file=sys.stderr)
    for c, r in remote.items():
        print(f"server, {c:>2} clients:           {r['pairs_per_s']:8.1f} pairs/s  p50 {r['p50_ms']:.1f} ms  "
              f"p99 {r['p99_ms']:.1f} ms  {r['mean_pairs_per_engine_call']:.1f} pairs/engine call", file=sys.stderr)
    print(json.dumps({"bench": "serve", "pairs": args.pairs, "per_request": args.per_request, "share": args.share,
                      "max_wait_ms": args.max_wait_ms, "rounds": args.rounds, "in_process": local, "server": remote,
                      "load_avg_1m": os.getloadavg()[0]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
