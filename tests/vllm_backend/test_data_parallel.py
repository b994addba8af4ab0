"""vllm_dp's process plumbing without vLLM (main venv): sharding, merge order, device and core
assignment, rank failures and deaths surfacing as errors that name the rank, clean shutdown.

The ranks run a fake engine (the `factory` hook) in real spawned processes; the vLLM replicas
themselves are exercised in test_dp_cli.py (vLLM venv)."""
import functools
import os
import time
from types import SimpleNamespace

import pytest

from baer_fast.errors import BaerError
from baer_fast.runtime.queries import EngineResult, EngineStats, Query
from baer_fast.runtime.vllm.backend import VllmOptions
from baer_fast.runtime.vllm.dp import DataParallelEngine, cpu_binds, device_slices, rank_env, shard_bounds

FAIL, DIE, SLOW = 999_001, 999_002, 999_003      # ids that make the fake engine raise / exit / hang


class FakeEngine:
    """Deterministic stand-in for a VllmEngine: log-probs derived from the ids alone."""

    def __init__(self, rank_tag: str):
        self.loaded = SimpleNamespace(context_len=321)
        self.tag = rank_tag

    def run(self, groups):
        ids = [i for g in groups for q in g for i in q.ids]
        if FAIL in ids:
            raise RuntimeError("fake engine failure")
        if DIE in ids:
            os._exit(7)
        if SLOW in ids:
            time.sleep(60)                          # far past the test's 2 s interrupt; a miss fails in a minute
        lps = [[[-(sum(q.ids) % 7) / 10.0 - c for c in range(len(q.choices))] for q in g] for g in groups]
        return EngineResult(lps, [len(g) for g in groups], EngineStats(tokens_prefilled=len(ids), forwards=1))

    def generate(self, prompts, sampling, *, seeds=None):
        return [[len(p), s] for p, s in zip(prompts, seeds)]

    def make_decoder(self):
        return SimpleNamespace(generate=lambda reqs: [("decoded", r.prompt) for r in reqs])

    def close(self):
        pass


def fake_factory(path, options, *, fail_at_start=False):
    if fail_at_start:
        raise RuntimeError("cannot start the fake engine")
    assert options.data_parallel_size == 1           # each rank is one replica
    return FakeEngine(os.environ.get("VLLM_CPU_OMP_THREADS_BIND", "?"))


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    from tests.fixtures.tiny_models import build_model_dir
    return build_model_dir(str(tmp_path_factory.mktemp("dp_tiny")))


def _groups(n, *, special=None, at=None):
    groups = [[Query(tuple(range(k, k + 3 + k % 5)), (1, 2)), Query((k, 9, 9), (3, 4, 5))] for k in range(n)]
    if special is not None:
        groups[at] = [Query((special,), (1, 2))]
    return groups


def _engine(model_dir, n=2, **kw):
    return DataParallelEngine(model_dir, VllmOptions(data_parallel_size=n),
                              factory=functools.partial(fake_factory, **kw))


def test_shard_bounds_are_contiguous_balanced_and_cover():
    for costs, n in [([5] * 10, 2), ([1, 100, 1, 1], 2), ([3, 1, 4, 1, 5, 9, 2, 6], 3), ([7], 3), ([], 2)]:
        b = shard_bounds(costs, n)
        assert len(b) == n and b[0][0] == 0 and b[-1][1] == len(costs)
        assert all(lo <= hi for lo, hi in b) and all(b[k][1] == b[k + 1][0] for k in range(n - 1))
    assert shard_bounds([5] * 10, 2) == [(0, 5), (5, 10)]


def test_device_slices_give_each_rank_its_tensor_parallel_gpus(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5,6,7")
    assert device_slices(2, 2) == ["4,5", "6,7"]
    assert rank_env(4, 1) == [{"CUDA_VISIBLE_DEVICES": d} for d in "4567"]
    with pytest.raises(BaerError, match="needs 6 GPUs"):
        device_slices(3, 2)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert device_slices(2, 1) == [None, None]


def test_cpu_ranks_split_the_cores(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda _: {0, 1, 2, 3, 5}, raising=False)
    assert cpu_binds(2) == ["0,1,2", "3,5"]
    assert cpu_binds(6) == ["nobind"] * 6
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.setenv("VLLM_CPU_OMP_THREADS_BIND", "0-3")          # the user's binding is kept
    assert rank_env(2, 1) == [{}, {}]


def test_runs_merge_in_input_order_and_equal_one_engine(model_dir):
    eng = _engine(model_dir)
    try:
        groups = _groups(9)
        got, want = eng.run(groups), FakeEngine("-").run(groups)
        assert got.logprobs == want.logprobs and got.tokens_per_group == want.tokens_per_group
        assert got.stats.forwards == 2                                   # both ranks took a share
        assert eng.run(_groups(1)).logprobs == FakeEngine("-").run(_groups(1)).logprobs   # one rank idle
        assert eng.run([]).logprobs == []
        assert eng.loaded.context_len == 321 and eng.kind == "vllm"
        assert eng.plan_tokens(groups) == [sum(len(q.ids) for q in g) for g in groups]
        prompts = [(1, 2, 3), (4,), (5, 6)]
        assert eng.generate(prompts, SimpleNamespace(max_tokens=4), seeds=[7, 8, 9]) == [[3, 7], [1, 8], [2, 9]]
        from baer_fast.runtime.decode import GenRequest
        reqs = [GenRequest(p, max_new_tokens=2) for p in prompts]
        assert eng.make_decoder().generate(reqs) == [("decoded", p) for p in prompts]
    finally:
        eng.close()
    assert all(not w.process.is_alive() for w in getattr(eng, "_ranks", []))
    with pytest.raises(BaerError, match="closed"):
        eng.run(_groups(2))


def _processes_of(eng):
    return [w.process for w in eng._ranks]


def test_a_rank_error_names_the_rank_and_shuts_every_rank_down(model_dir):
    eng = _engine(model_dir)
    procs = _processes_of(eng)
    with pytest.raises(BaerError, match=r"rank 1 failed to run:(.|\n)*fake engine failure"):
        eng.run(_groups(8, special=FAIL, at=7))
    assert eng.closed and all(not p.is_alive() for p in procs)


def test_a_dead_rank_is_an_error_not_a_hang(model_dir):
    eng = _engine(model_dir)
    procs = _processes_of(eng)
    t0 = time.monotonic()
    with pytest.raises(BaerError, match=r"rank 0 died \(exit code 7\)"):
        eng.run(_groups(8, special=DIE, at=0))
    assert time.monotonic() - t0 < 30
    assert all(not p.is_alive() for p in procs)


def test_a_rank_that_cannot_start_is_named(model_dir):
    with pytest.raises(BaerError, match=r"rank 0 failed to start its engine:(.|\n)*cannot start"):
        _engine(model_dir, fail_at_start=True)


@pytest.fixture
def ctrl_c_raises():
    """SIGINT raises KeyboardInterrupt while the test runs, as in a terminal. A process started as a
    background job of a non-interactive shell (`cmd &`, nohup) inherits SIGINT ignored, and then
    `_thread.interrupt_main` does nothing: the test would wait on the busy rank instead."""
    import signal
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def test_keyboard_interrupt_during_a_call_stops_every_rank(model_dir, ctrl_c_raises):
    """Ctrl-C while ranks are busy: the interrupt propagates and busy ranks are terminated, not awaited."""
    import _thread
    import threading
    eng = _engine(model_dir)
    procs = _processes_of(eng)
    timer = threading.Timer(2.0, _thread.interrupt_main)
    timer.start()
    t0 = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            eng.run(_groups(8, special=SLOW, at=0))
    finally:
        timer.cancel()
    assert eng.closed and all(not p.is_alive() for p in procs)
    assert time.monotonic() - t0 < 30
