"""Kernel benchmarks, side by side in one run; never asserts, never part of the test suite.

    readout:  constrained readout (gathered LM-head rows: torch reference; Triton on CUDA)
              vs the full-vocabulary projection + gather + log-softmax, at a Qwen3-8B-like
              shape (V=151936, H=4096, bf16 head, C=2 labels; N=64 positions on CPU, 2048
              on CUDA)
    evidence: fused evidence features + stack map (torch reference; Triton on CUDA) vs the
              numpy path (`features.evidence.evidence` + `stack_features`)

Time is pytest-benchmark's median; peak memory is what one call adds on top of its inputs:
`torch.cuda.max_memory_allocated` on CUDA, and on CPU the growth of the peak RSS of a fresh
subprocess that first builds (and touches) the inputs (`python bench_kernels.py --peak ...`,
Linux only; -1 where that fails).

    python -m pytest benchmarks/bench_kernels.py --benchmark-json=/tmp/bench_kernels.json -q -s

The last line printed is one JSON object with medians, peaks and ratios (also written to
$BENCH_KERNELS_JSON when set). Without pytest-benchmark, `python benchmarks/bench_kernels.py
[--rounds 20]` times the same paths with a plain median-of-N loop, prints a table to stderr and
the same line to stdout. With `--benchmark-disable` every path runs once and no timing row is
recorded (the JSON line says so).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np
import torch

from baer_fast.features import evidence as numpy_features
from baer_fast.kernels.choice_logits import choice_logits, choice_logits_ref
from baer_fast.kernels.dispatch import HAS_TRITON_GPU
from baer_fast.kernels.evidence_features import evidence_features, evidence_features_ref

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
# Qwen3-8B head; verdict positions: 64 on CPU (sane memory), 2048 on a GPU (a decode batch)
READOUT = dict(v=151_936, h=4096, n=2048 if DEVICE == "cuda" else 64, c=2)
EVIDENCE = dict(n=20_000, k=12, m=5, g=6)            # pairs, experts, runs, categories


def _readout_inputs(device: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """hidden [N, H] bf16, weight [V, H] bf16 (every page touched), choice_ids [C] int64."""
    gen = torch.Generator().manual_seed(0)
    v, h, n, c = READOUT["v"], READOUT["h"], READOUT["n"], READOUT["c"]
    weight = torch.empty(v, h, dtype=torch.bfloat16, device=device).normal_(0.0, h ** -0.5)
    hidden = torch.randn(n, h, generator=gen).to(device, torch.bfloat16)
    return hidden, weight, torch.randint(0, v, (c,), generator=gen).to(device)


def full_projection(hidden, weight, choice_ids, *, bias=None):
    """What a plain HF forward does: [N, V] logits, upcast, then the C label columns."""
    logits = torch.nn.functional.linear(hidden, weight, bias).float()          # [N, V] fp32
    picked = logits.gather(1, choice_ids.expand(hidden.shape[0], -1))          # [N, C]
    return torch.log_softmax(picked, dim=-1)


def _evidence_inputs(device: str) -> tuple[np.ndarray, torch.Tensor, torch.Tensor, list[str]]:
    rng = np.random.default_rng(0)
    n, k, m, g = EVIDENCE["n"], EVIDENCE["k"], EVIDENCE["m"], EVIDENCE["g"]
    u = rng.random((n, k, m))
    u[rng.random(u.shape) < 0.2] = np.nan
    cat = rng.integers(-1, g, n)
    names = [f"c{i}" for i in range(g)]
    subsets = [names[i] if i >= 0 else "unseen" for i in cat]
    return u, torch.from_numpy(u).to(device), torch.from_numpy(cat).to(device), subsets


def numpy_evidence(u: np.ndarray, subsets: list[str]) -> np.ndarray:
    _, _, z, zt = numpy_features.evidence(u)
    return numpy_features.stack_features(z, zt, subsets, [f"c{i}" for i in range(EVIDENCE["g"])])


READOUT_PATHS = {"full_projection": full_projection, "gathered_torch": choice_logits_ref,
                 "gathered_triton": choice_logits}
EVIDENCE_PATHS = {"torch": evidence_features_ref, "triton": evidence_features}


def _synced(fn):
    def run(*args, **kw):
        out = fn(*args, **kw)
        if DEVICE == "cuda":
            torch.cuda.synchronize()
        return out
    return run


def _peak_cuda(fn, *args, **kw) -> int:
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    fn(*args, **kw)
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - base


def _peak_cpu_subprocess(bench: str, path: str) -> int:
    proc = subprocess.run([sys.executable, __file__, "--peak", bench, path], capture_output=True,
                          text=True, timeout=600)
    return int(proc.stdout.split()[-1]) if proc.returncode == 0 else -1


def _status_bytes(field: str) -> int:
    with open("/proc/self/status") as f:
        line = next(row for row in f if row.startswith(field + ":"))
    return int(line.split()[1]) * 1024


def _peak_cpu_here(bench: str, path: str) -> int:
    """Run in a fresh process: peak RSS growth of one call over its (touched) inputs.

    Writing 5 to /proc/self/clear_refs resets the peak (VmHWM) to the current RSS, so
    temporaries of building the inputs do not hide the call's own peak. A one-row call
    first loads libraries' code pages, which would otherwise count as the call's memory.
    """
    if bench == "readout":
        hidden, weight, ids = _readout_inputs("cpu")
        call = lambda rows: READOUT_PATHS[path](hidden[:rows], weight, ids)     # noqa: E731
    else:
        u, ut, cat, subsets = _evidence_inputs("cpu")
        call = (lambda rows: numpy_evidence(u[:rows], subsets[:rows])) if path == "numpy" else (
            lambda rows: EVIDENCE_PATHS[path](ut[:rows], category=cat[:rows],
                                              n_categories=EVIDENCE["g"]))
    call(1)           # warm-up on one row: loads code pages without caching large buffers
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    base = _status_bytes("VmRSS")
    call(None)
    return max(0, _status_bytes("VmHWM") - base)


def new_results() -> dict:
    return {"bench": "kernels", "device": DEVICE, "torch": torch.__version__,
            "threads": torch.get_num_threads(),   # on a shared CPU, OMP_NUM_THREADS=1 is steadier
            "triton_gpu": HAS_TRITON_GPU, "readout": {"shape": READOUT},
            "evidence": {"shape": EVIDENCE}}


def _add_ratios(out: dict) -> None:
    for bench, base in (("readout", "full_projection"), ("evidence", "numpy")):
        rows = out[bench]
        if base not in rows:
            continue
        for name, row in list(rows.items()):
            if isinstance(row, dict) and "median_s" in row and name != base:
                row["speedup_vs_" + base] = rows[base]["median_s"] / row["median_s"]
                if row.get("peak_bytes", 0) > 0:
                    row["memory_ratio_" + base] = rows[base]["peak_bytes"] / row["peak_bytes"]


def finish(out: dict) -> str:
    """Ratios added; the JSON line, also written to $BENCH_KERNELS_JSON when set."""
    _add_ratios(out)
    line = json.dumps(out, sort_keys=True)
    if os.environ.get("BENCH_KERNELS_JSON"):
        with open(os.environ["BENCH_KERNELS_JSON"], "w") as f:
            f.write(line + "\n")
    return line


def case(bench: str, path: str, inputs: tuple):
    """(callable, args, kwargs) of one benchmarked path on prepared inputs."""
    if bench == "readout":
        return READOUT_PATHS[path], inputs, {}
    u, ut, cat, subsets = inputs
    if path == "numpy":
        return numpy_evidence, (u, subsets), {}
    return EVIDENCE_PATHS[path], (ut,), {"category": cat, "n_categories": EVIDENCE["g"]}


def peak_bytes(bench: str, path: str, inputs: tuple) -> int:
    fn, args, kw = case(bench, path, inputs)
    if DEVICE == "cuda" and path != "numpy":
        return _peak_cuda(fn, *args, **kw)
    return _peak_cpu_subprocess(bench, path)


def runnable(path: str) -> bool:
    return "triton" not in path or HAS_TRITON_GPU     # the interpreter is not benchmarked


def standalone(rounds: int = 20) -> str:
    """Without pytest-benchmark: median wall time of `rounds` synced calls, same JSON line."""
    out = new_results()
    for bench, paths, make in (("readout", READOUT_PATHS, _readout_inputs),
                               ("evidence", ["numpy", *EVIDENCE_PATHS], _evidence_inputs)):
        inputs = make(DEVICE)
        for path in filter(runnable, paths):
            fn, args, kw = case(bench, path, inputs)
            run = _synced(fn)
            run(*args, **kw)
            times = []
            for _ in range(rounds):
                t0 = time.perf_counter()
                run(*args, **kw)
                times.append(time.perf_counter() - t0)
            out[bench][path] = {"median_s": statistics.median(times),
                                "peak_bytes": peak_bytes(bench, path, inputs)}
        del inputs
    line = finish(out)                      # adds the ratios the table shows
    print(table(out), file=sys.stderr)
    return line


def table(out: dict) -> str:
    """The timed rows, one per path: median, peak memory and the ratios against the naive path."""
    lines = [f"{'bench':<9} {'path':<16} {'median':>11} {'peak MiB':>9} {'speedup':>8} {'memory':>7}"]
    for bench, base in (("readout", "full_projection"), ("evidence", "numpy")):
        for path, row in out[bench].items():
            if "median_s" not in row:
                continue
            speed, mem = row.get("speedup_vs_" + base), row.get("memory_ratio_" + base)
            lines.append(f"{bench:<9} {path:<16} {row['median_s'] * 1e3:9.2f}ms {row['peak_bytes'] / 2 ** 20:9.1f} "
                         + (f"{speed:7.2f}x" if speed else f"{'-':>8}") + " "
                         + (f"{mem:6.2f}x" if mem else f"{'-':>7}"))
    return "\n".join(lines)


try:  # the pytest-benchmark face of this file; standalone() works without pytest
    import pytest
except ImportError:
    pytest = None

if pytest is not None:
    @pytest.fixture(scope="module")
    def results(pytestconfig):
        """Collects medians and peaks; prints one JSON line when the module is done."""
        out = new_results()
        yield out
        line = finish(out)
        reporter = pytestconfig.pluginmanager.get_plugin("terminalreporter")
        if reporter:
            reporter.write("\n")              # -q leaves the cursor after the progress dots
            reporter.write_line(line)
        else:
            print(line)

    @pytest.fixture(scope="module")
    def readout_inputs():
        return _readout_inputs(DEVICE)

    @pytest.fixture(scope="module")
    def evidence_inputs():
        return _evidence_inputs(DEVICE)

    def _bench(benchmark, results, bench: str, path: str, inputs: tuple) -> None:
        if not runnable(path):
            pytest.skip("Triton path needs a CUDA device (the interpreter is not benchmarked)")
        fn, args, kw = case(bench, path, inputs)
        benchmark.group = bench
        benchmark.pedantic(_synced(fn), args=args, kwargs=kw, rounds=5, warmup_rounds=1)
        if benchmark.disabled:           # --benchmark-disable: the path ran once, untimed; no row
            results["timing"] = "disabled (--benchmark-disable): each path ran once, no rows recorded"
            return
        results[bench][path] = {"median_s": benchmark.stats.stats.median,
                                "peak_bytes": peak_bytes(bench, path, inputs)}

    @pytest.mark.parametrize("path", list(READOUT_PATHS))
    def test_readout(benchmark, results, readout_inputs, path):
        _bench(benchmark, results, "readout", path, readout_inputs)

    @pytest.mark.parametrize("path", ["numpy", *EVIDENCE_PATHS])
    def test_evidence(benchmark, results, evidence_inputs, path):
        _bench(benchmark, results, "evidence", path, evidence_inputs)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 epilog="Under pytest: python -m pytest benchmarks/bench_kernels.py -q -s")
    ap.add_argument("--rounds", type=int, default=20, help="timed calls per path (default 20)")
    ap.add_argument("--peak", nargs=2, metavar=("BENCH", "PATH"),
                    help="internal: print the peak RSS growth of one call (run in a fresh process)")
    args = ap.parse_args(argv)
    print(_peak_cpu_here(*args.peak) if args.peak else standalone(args.rounds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
