"""SIGKILL `baer-fast score` mid-run several times, resume, and compare with an uninterrupted run."""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from baer_fast import artifact
from baer_fast.io.records import Signals, write_signals
from baer_fast.selection.fit import fit_condition
from tests.fixtures.kill_resume import progress

BATCH = 100     # BAER_FAST_SCORE_BATCH: many small batches, so a kill lands mid-run
EXPERTS = ("direct", "cot", "rubric")


def synthetic_signals(n: int, seed: int) -> list:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        label = rng.choice("ab")
        experts = {}
        for k, name in enumerate(EXPERTS):
            bias = 0.15 + 0.1 * k if label == "a" else -0.15 - 0.1 * k
            experts[name] = [min(1.0, max(0.0, round(0.5 + bias + rng.gauss(0, 0.25), 4))) for _ in range(2)]
        out.append(Signals(f"syn-{i:07d}", experts, subset=rng.choice(("chat", "code")), label=label,
                           meta={"condition": "synthetic"}))
    return out


def _score_cmd(sig: str, head: str, out: str) -> list[str]:
    return [sys.executable, "-m", "baer_fast.cli", "--quiet", "score", "--signals", sig, "--head", head, "--out", out]


def _env(batch: int) -> dict:
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return dict(os.environ, BAER_FAST_SCORE_BATCH=str(batch), PYTHONPATH=root)


def _kill_when(cmd: list, env: dict, out: str, target: int, rng: random.Random) -> bool:
    """Start the run, SIGKILL it once `target` records are durable (plus a random few ms).

    Returns True when the kill landed before the run finished: the process was alive and
    its progress file not yet marked complete (a run can be killed while it exits).
    """
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    while proc.poll() is None and progress(out).get("records", 0) < target:
        time.sleep(0.02)
    time.sleep(rng.uniform(0, 0.03))
    alive = proc.poll() is None
    if alive:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    return alive and not progress(out).get("complete", False)


def _killed_three_times(sig: str, head: str, env: dict, n_records: int, tmp_path) -> str:
    """Kill three runs on one output at rising targets; return the output once the last kill landed.

    A kill misses when the run finishes first (a fast machine scores the rest of the file
    between two polls). The test needs an unfinished output to resume, so a sequence whose
    last kill missed is started over on a new file with the targets halved.
    """
    rng = random.Random(20261129)
    fracs = sorted(rng.uniform(0.05, 0.8) for _ in range(3))
    for attempt in range(4):
        out = str(tmp_path / f"killed-{attempt}.jsonl")
        landed = [_kill_when(_score_cmd(sig, head, out), env, out, int(f * n_records), rng) for f in fracs]
        if landed[-1] and sum(landed) >= 2:
            return out
        fracs = [f / 2 for f in fracs]
    pytest.fail(f"no kill sequence left an unfinished run (last: {landed})")


@pytest.mark.parametrize("n_records,batch", [(5_000, 50),
                                             pytest.param(200_000, 500, marks=pytest.mark.slow)])
def test_sigkill_and_resume_gives_the_uninterrupted_output(tmp_path, n_records, batch):
    sig, head, env = str(tmp_path / "signals.jsonl"), str(tmp_path / "head.json"), _env(batch)
    records = synthetic_signals(n_records, seed=7)
    write_signals(sig, records)
    artifact.save(head, fit_condition(records[:3000], condition="synthetic"))
    ref = str(tmp_path / "ref.jsonl")
    subprocess.run(_score_cmd(sig, head, ref), env=env, check=True, capture_output=True, timeout=300)

    out = _killed_three_times(sig, head, env, n_records, tmp_path)
    with open(out + ".progress.json", encoding="utf-8") as fh:
        assert not json.load(fh)["complete"]
    done = subprocess.run(_score_cmd(sig, head, out), env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr

    with open(ref, "rb") as fh:
        want = fh.read()
    with open(out, "rb") as fh:
        got = fh.read()
    ids = [json.loads(line)["id"] for line in got.splitlines()]
    assert len(ids) == len(set(ids)) == n_records
    assert got == want
