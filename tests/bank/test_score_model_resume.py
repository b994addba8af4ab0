"""`score --model`: the engine options of `experts`, and its expert work resumable under SIGKILL."""
import json
import os
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


def test_a_head_decodes_with_the_budgets_and_seed_its_signals_were_made_with(qwen_dir, tmp_path, caplog):
    """A head fitted on `experts --max-new-tokens cot=6` signals was run by score --model (and Judge) with
    the protocol's default budget, so its cot runs were not those it was fitted on."""
    from baer_fast import Judge, artifact
    from baer_fast.cli import main
    from baer_fast.io.records import read_signals
    from tests.fixtures.tiny_models import make_pairs

    pairs = tmp_path / "pairs.jsonl"
    write_pairs(str(pairs), make_pairs(18, seed=2))
    sig, head, out = tmp_path / "sig.jsonl", tmp_path / "head.json", tmp_path / "scores.jsonl"
    assert main(["-q", "experts", "--model", qwen_dir, "--input", str(pairs), "--out", str(sig),
                 "--experts", "direct,cot", "--max-new-tokens", "cot=6", "--seed", "4"]) == 0
    assert main(["-q", "fit", "--signals", str(sig), "--condition", "c", "--out", str(head), "--head", "mean"]) == 0
    art = artifact.load(str(head))
    assert art["generation"] == {"cot": {"max_new_tokens": 6, "seed": 4}}
    assert main(["-q", "score", "--model", qwen_dir, "--input", str(pairs), "--head", str(head),
                 "--out", str(out)]) == 0
    made = {s.id: s for s in read_signals(str(sig))}
    for s in read_signals(str(out) + ".signals.jsonl"):
        assert s.meta["generation"]["cot"]["max_new_tokens"] == 6 and s.experts["cot"] == made[s.id].experts["cot"]
    judge = Judge.from_pretrained(qwen_dir, head=str(head), kernels="torch")
    assert judge.options.generation.budget("cot") == 6 and judge.options.generation.seed == 4
    with caplog.at_level("WARNING", logger="baer_fast"):
        assert main(["-q", "score", "--model", qwen_dir, "--input", str(pairs), "--head", str(head),
                     "--out", str(tmp_path / "other.jsonl"), "--max-new-tokens", "cot=9"]) == 0
    assert "made with max_new_tokens=6, seed=4" in caplog.text


def test_an_out_it_cannot_resume_is_refused_before_the_expert_work(qwen_dir, tmp_path, capsys, monkeypatch):
    """--out holding another run's scores (score --signals, another input) was refused only after the
    expert work, hours on a real judge, and --overwrite then threw that work away with the old scores."""
    from baer_fast.cli import main
    from baer_fast.commands import stream
    from baer_fast.io.records import Signals, write_signals

    sig, pairs, out = (str(tmp_path / n) for n in ("s.jsonl", "p.jsonl", "scores.jsonl"))
    write_signals(sig, [Signals("x", {"direct": [0.6, 0.7], "score": [0.5, 0.4]})])
    write_pairs(pairs, synthetic_pairs(2, seed=3))
    assert main(["-q", "score", "--signals", sig, "--out", out]) == 0
    before = open(out, "rb").read()
    capsys.readouterr()
    opened = []
    monkeypatch.setattr(stream, "open_from_args", lambda args: opened.append(1) or pytest.fail("engine opened"))
    assert main(["-q", "score", "--model", qwen_dir, "--input", pairs, "--out", out]) == 2
    assert "output was written by a different run" in capsys.readouterr().err
    assert not opened and not os.path.exists(out + ".signals.jsonl") and open(out, "rb").read() == before
