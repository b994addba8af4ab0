"""Routing forest: Numba traversal vs sklearn predict_proba, same 100-tree depth-5 forest, 30 features.

    python -m pytest benchmarks/bench_router.py --benchmark-only -q -s     # pytest-benchmark
    python benchmarks/bench_router.py                                        # plain timer

Batches 1, 64 and 10,000, both implementations side by side in one run; ends with one
JSON line {batch: {numba_median_s, sklearn_median_s, speedup}}. Never asserts: it reports.
With `--benchmark-disable` every call runs once untimed: no batch rows, and the JSON line says so.
Batch 1 uses the one-row path (`predict_one`), larger batches `predict` (parallel from
PARALLEL_MIN_ROWS rows). The jit compile happens once in setup, outside the timings.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from functools import lru_cache

import numpy as np
import pytest

BATCHES = (1, 64, 10_000)
N_FEATURES = 30


@lru_cache(maxsize=1)
def setup():
    """-> (sklearn model, compiled forest, {batch: rows}) with the jit warmed up."""
    from sklearn.ensemble import RandomForestClassifier

    from baer_fast.heads.forest import CompiledForest

    rng = np.random.default_rng(0)
    x = rng.normal(size=(4000, N_FEATURES))
    y = (x[:, 0] + x[:, 1] * x[:, 2] + rng.normal(size=len(x)) > 0).astype(int)
    model = RandomForestClassifier(n_estimators=100, max_depth=5, min_samples_leaf=8, random_state=0,
                                   n_jobs=1).fit(x, y)
    forest = CompiledForest.from_sklearn(model)
    rows = {b: rng.normal(size=(b, N_FEATURES)) for b in BATCHES}
    for b in BATCHES:                       # compile every path once, check agreement
        np.testing.assert_allclose(numba_call(forest, rows[b]), model.predict_proba(rows[b])[:, 1], atol=1e-6)
    return model, forest, rows


def numba_call(forest, x):
    return forest.predict_one(x[0]) if len(x) == 1 else forest.predict(x)


def sklearn_call(model, x):
    return model.predict_proba(x)[:, 1]


# ---------------------------------------------------------------- pytest-benchmark

_RESULTS: dict = {}


class _JsonLine:
    """Registered at run time so the JSON line comes after pytest-benchmark's tables."""

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter):
        terminalreporter.write_line(json.dumps(summary(_RESULTS)))


@pytest.fixture(scope="module", autouse=True)
def _report(request):
    if not request.config.pluginmanager.has_plugin("bench_router_json"):
        request.config.pluginmanager.register(_JsonLine(), "bench_router_json")
    yield


@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("impl", ["numba", "sklearn"])
def test_forest_predict(benchmark, impl, batch):
    model, forest, rows = setup()
    x = rows[batch]
    benchmark.group = f"batch={batch}"
    if impl == "numba":
        benchmark(numba_call, forest, x)
    else:
        benchmark(sklearn_call, model, x)
    if benchmark.disabled:        # --benchmark-disable: ran once, untimed; no row
        _RESULTS["timing"] = "disabled (--benchmark-disable): each call ran once, no rows recorded"
    else:
        _RESULTS[(impl, batch)] = benchmark.stats.stats.median


def summary(results: dict) -> dict:
    out = {"bench": "router_forest", "trees": 100, "depth": 5, "features": N_FEATURES,
           "cpus": os.cpu_count(), "batches": {}}
    if "timing" in results:
        out["timing"] = results["timing"]
    for b in BATCHES:
        nb, sk = results.get(("numba", b)), results.get(("sklearn", b))
        if nb and sk:
            out["batches"][str(b)] = {"numba_median_s": nb, "sklearn_median_s": sk, "speedup": sk / nb}
    return out


# ---------------------------------------------------------------- plain timer

def time_call(fn, *args, min_time: float = 0.5, max_reps: int = 20_000) -> list[float]:
    times, start = [], time.perf_counter()
    while (time.perf_counter() - start < min_time or len(times) < 5) and len(times) < max_reps:
        t0 = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t0)
    return times


def main(argv=None) -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0],
                            epilog="Under pytest: python -m pytest benchmarks/bench_router.py --benchmark-only -q -s"
                            ).parse_args(argv)           # no options: --help documents the two ways to run it
    model, forest, rows = setup()
    results = {}
    print(f"{'batch':>7} {'impl':<8} {'median':>12} {'p10':>12} {'p90':>12}", file=sys.stderr)
    for b in BATCHES:
        for impl, fn, obj in (("numba", numba_call, forest), ("sklearn", sklearn_call, model)):
            t = time_call(fn, obj, rows[b])
            q = statistics.quantiles(t, n=10)
            results[(impl, b)] = statistics.median(t)
            print(f"{b:>7} {impl:<8} {results[(impl, b)] * 1e6:10.1f}us {q[0] * 1e6:10.1f}us "
                  f"{q[-1] * 1e6:10.1f}us", file=sys.stderr)
    print(json.dumps(summary(results)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
