"""`score --model`: the engine options of `experts`, and its expert work resumable under SIGKILL."""
import json
import subprocess
import sys

import pytest

from baer_fast.io.records import write_pairs
from tests.fixtures.data import synthetic_pairs
from tests.fixtures.kill_resume import durable, kill_after_first_batch, lines



def _cmd(judge_dir, pairs, head, out, *extra):
    return [sys.executable, "-m", "baer_fast.cli", "-q", "score", "--model", judge_dir, "--input", str(pairs),
            "--head", head, "--out", str(out), "--kernels", "torch", "--dtype", "float32", "--device", "cpu",
            "--memory-gb", "1", "--chunk-pairs", "2", *extra]


def test_score_takes_the_experts_engine_options():
    import argparse

    from baer_fast.commands import experts, score
    p, q = argparse.ArgumentParser(), argparse.ArgumentParser()
    score.add_arguments(p)
    experts.add_arguments(q)
    engine = {a.dest for a in q._actions} - {"input", "out", "experts", "keep_texts", "derived_params", "help"}
    assert engine <= {a.dest for a in p._actions}
    args = p.parse_args(["--head", "h", "--out", "o", "--input", "i", "--model", "m", "--backend", "vllm",
                         "--dtype", "bfloat16", "--memory-gb", "2", "--device", "cpu"])
    assert (args.backend, args.dtype, args.memory_gb, args.device) == ("vllm", "bfloat16", 2.0, "cpu")


@pytest.mark.slow
def test_sigkill_resumes_the_expert_work_without_redoing_finished_pairs(judge_dir, head_path, tmp_path):
    pairs = tmp_path / "pairs.jsonl"
    write_pairs(str(pairs), synthetic_pairs(10, seed=11))
    ref = tmp_path / "ref.jsonl"
    subprocess.run(_cmd(judge_dir, pairs, head_path, ref), check=True, capture_output=True, timeout=600)

    out = tmp_path / "killed.jsonl"
    signals = str(out) + ".signals.jsonl"
    done = kill_after_first_batch(_cmd(judge_dir, pairs, head_path, out), signals, timeout_s=600)
    assert 0 < done < 10, done                  # killed after a durable chunk of signals, before the end
    kept = lines(signals)[:done]
    run = subprocess.run(_cmd(judge_dir, pairs, head_path, out), capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    assert f"({10 - done} run, {done} already done)" in run.stderr      # finished pairs were not redone
    # the killed run's records survive byte for byte; the finished file is put back in input order
    # (ResumableWriter.reorder), so they are no longer necessarily its first lines
    assert set(kept) <= set(lines(signals))
    assert [json.loads(x)["id"] for x in lines(signals)] == [f"t{i:03d}" for i in range(10)]
    assert durable(signals) == 10
    want = sorted(lines(ref))
    assert sorted(lines(out)) == want           # the same scores, bit for bit, as the uninterrupted run
