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


def _records_done(out: str) -> int:
    try:
        with open(out + ".progress.json", encoding="utf-8") as fh:
            return json.load(fh)["records"]
    except (OSError, ValueError, KeyError):
        return 0


def _kill_when(cmd: list, env: dict, out: str, target: int, rng: random.Random) -> bool:
    """Start the run, SIGKILL it once `target` records are durable (plus a random few ms).

    Returns True when the kill landed before the run finished.
    """
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    while proc.poll() is None and _records_done(out) < target:
        time.sleep(0.02)
    time.sleep(rng.uniform(0, 0.03))
    alive = proc.poll() is None
    if alive:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    return alive


@pytest.mark.parametrize("n_records,batch", [(5_000, 50),
                                             pytest.param(200_000, 500, marks=pytest.mark.slow)])
def test_sigkill_and_resume_gives_the_uninterrupted_output(tmp_path, n_records, batch):
    sig, head, env = str(tmp_path / "signals.jsonl"), str(tmp_path / "head.json"), _env(batch)
    records = synthetic_signals(n_records, seed=7)
    write_signals(sig, records)
    artifact.save(head, fit_condition(records[:3000], condition="synthetic"))
    ref = str(tmp_path / "ref.jsonl")
    subprocess.run(_score_cmd(sig, head, ref), env=env, check=True, capture_output=True, timeout=300)

    out = str(tmp_path / "killed.jsonl")
    rng = random.Random(20261129)
    landed = 0
    for frac in sorted(rng.uniform(0.05, 0.9) for _ in range(3)):
        landed += _kill_when(_score_cmd(sig, head, out), env, out, int(frac * n_records), rng)
    assert landed >= 2, "the kills should land mid-run"
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
