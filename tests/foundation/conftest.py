"""Fixtures for the foundation tests: random signals, the shared real data, a CLI runner."""
from __future__ import annotations

import os
import random
import sys

import pytest

from baer_fast.cli import main
from baer_fast.io.records import Signals

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if _ROOT not in sys.path:      # `tests` is not a package of its own (as in tests/runtime/conftest.py)
    sys.path.insert(0, _ROOT)
from tests.fixtures.data import shared  # noqa: E402,F401  (test_import_real imports it from here)


def make_signals(n: int, *, experts=("e1", "e2", "e3", "e4"), seed: int = 0, subsets=("chat", "math"),
                 condition: str = "synthetic") -> list[Signals]:
    """Labelled signals where e1 is informative, e2 weakly so, the rest noise; some runs missing."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        label = rng.choice("ab")
        sign = 1 if label == "a" else -1
        runs = {}
        for k, name in enumerate(experts):
            strength = (0.35, 0.15, 0.0, 0.0)[k % 4]
            run = []
            for _ in range(2):
                u = min(1.0, max(0.0, 0.5 + sign * strength + rng.gauss(0, 0.2)))
                run.append(None if rng.random() < 0.05 else round(u, 6))
            runs[name] = run
        out.append(Signals(f"p{i:05d}", runs, subset=rng.choice(subsets), label=label,
                           meta={"condition": condition, "len_a": rng.randint(1, 900),
                                 "len_b": rng.randint(1, 900)}))
    return out


@pytest.fixture
def cli(capsys):
    """Run the CLI in-process; returns (exit_code, stdout, stderr)."""
    def run(*argv):
        code = main([str(a) for a in argv])
        cap = capsys.readouterr()
        return code, cap.out, cap.err
    return run
