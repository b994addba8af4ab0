"""Shared inputs of the reliability tests: the LLMBar sample's GPT-4 condition, fitted once."""
from __future__ import annotations

import os

import pytest

from baer_fast import artifact
from baer_fast.commands.demo import sample_dir
from baer_fast.io.adapters import load
from baer_fast.io.jsonl import write_jsonl
from baer_fast.io.records import write_signals
from baer_fast.scoring import score_records
from baer_fast.selection.fit import fit_condition

BAD = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "bad")


@pytest.fixture(scope="session")
def llmbar(tmp_path_factory) -> dict:
    """{'signals', 'head', 'scores'} paths for the GPT-4 condition of the shipped sample."""
    d = tmp_path_factory.mktemp("llmbar")
    signals = load("llmbar", sample_dir()).banks["GPT-4"]
    paths = {"signals": str(d / "signals.GPT-4.jsonl"), "head": str(d / "head.json"),
             "scores": str(d / "scores.jsonl"), "dir": str(d)}
    write_signals(paths["signals"], signals)
    art = fit_condition(signals, condition="GPT-4")
    artifact.save(paths["head"], art)
    write_jsonl(paths["scores"], score_records(artifact.load(paths["head"]), signals))
    return paths


def snapshot(folder: str) -> dict:
    """{relative path: bytes} of every file under `folder` (temp files included)."""
    out = {}
    for root, _, files in os.walk(folder):
        for f in files:
            p = os.path.join(root, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, folder)] = fh.read()
    return out
