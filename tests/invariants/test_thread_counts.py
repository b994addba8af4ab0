"""Model runs under other torch thread counts (docs/protocols.md, "Symmetry and determinism").

What holds at every thread count (1, 2, 4), for single-pass, greedy and sampled experts, in the
batched and the batch-invariant mode: the same call twice gives the same bits, and a pair and its
swap mirror exactly. Across thread counts the runs are not promised to be the same bits: MKL
splits a matrix product's rows among its threads, and a row computed in a block of other height
rounds differently (measured on the 2-core CPU: 1 and 2 threads agreed, 4 threads moved runs by
up to 5e-7 and self_consistency drew other tokens). Single-pass runs stay within the fp32 rounding
bound of tests/fixtures/tolerances.py; generated texts (and so sampled runs) may differ.
"""
import pytest

from baer_fast.bank.generative import GenerationConfig
from baer_fast.io.records import swap_runs

from tests.fixtures.prompts import pairs as make_pairs
from tests.fixtures.tolerances import readout_tol

MODEL_SEED = 5          # own_model_dir (tests/invariants/conftest.py)
SINGLE = ["direct", "score", "pointwise"]
EXPERTS = SINGLE + ["cot", "self_consistency"]
GEN = GenerationConfig(max_new_tokens={"cot": 4, "self_consistency": 4}, seed=7)
THREADS = (1, 2, 4)


def _runs(engine, pairs, threads: int, invariant: bool) -> list[dict]:
    import torch

    from baer_fast.bank.runner import run_experts
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        return [s.experts for s in run_experts(engine, pairs, experts=EXPERTS, generation=GEN,
                                               batch_invariant=invariant)]
    finally:
        torch.set_num_threads(before)


@pytest.fixture(scope="module")
def batch():
    ps = make_pairs(3, seed=4)
    return ps + [p.swapped() for p in ps]


@pytest.mark.parametrize("invariant", [False, True], ids=["batched", "batch-invariant"])
def test_each_thread_count_repeats_and_mirrors_exactly(own_engine, batch, invariant):
    n = len(batch) // 2
    got = {}
    for threads in THREADS:
        first, again = (_runs(own_engine, batch, threads, invariant) for _ in range(2))
        assert again == first, threads                                   # run to run: same bits
        for i in range(n):
            assert first[n + i] == {e: swap_runs(r) for e, r in first[i].items()}, threads   # exact mirror
        got[threads] = first
    tol = readout_tol(own_engine.loaded, batch[:n])
    for threads in THREADS[1:]:
        for one, other in zip(got[1], got[threads]):
            for e in SINGLE:
                assert max(abs(x - y) for x, y in zip(one[e], other[e])) <= tol, (threads, e)


def test_a_resume_under_another_thread_count_is_warned(own_model_dir, batch, tmp_path, monkeypatch, caplog):
    """Another machine's core count is another torch thread count: the pairs left round differently
    from the file's, so the resume says so, as for the other settings that move only the last bits."""
    import torch

    from baer_fast.bank import runner
    from baer_fast.cli import main
    from baer_fast.io.records import write_pairs
    real, calls = runner.expert_rows, []

    def stop_second(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("killed")
        return real(*args, **kwargs)
    write_pairs(str(tmp_path / "pairs.jsonl"), batch[:3])
    argv = ["-q", "experts", "--model", own_model_dir, "--input", str(tmp_path / "pairs.jsonl"), "--out",
            str(tmp_path / "s.jsonl"), "--experts", "direct", "--chunk-pairs", "1", "--kernels", "torch"]
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        monkeypatch.setattr(runner, "expert_rows", stop_second)
        with pytest.raises(RuntimeError, match="killed"):
            main(argv)
        monkeypatch.setattr(runner, "expert_rows", real)
        torch.set_num_threads(2)
        with caplog.at_level("WARNING", logger="baer_fast"):
            assert main(argv) == 0
    finally:
        torch.set_num_threads(before)
    assert "resuming with other engine settings" in caplog.text and "cpu_threads 1 -> 2" in caplog.text
