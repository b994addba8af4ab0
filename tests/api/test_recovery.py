"""A call that raises leaves the Judge usable: bad input, an over-long pair with truncate=False, or a
KeyboardInterrupt mid-forward (a reward loop stopped by hand, then resumed in the same process); the
next call gets the scores a fresh Judge gives."""
from __future__ import annotations

import pytest
import torch

from baer_fast.api import Judge
from baer_fast.errors import InputError
from tests.fixtures.data import synthetic_pairs

PAIRS = synthetic_pairs(6, seed=11)
QAB = ([p.question for p in PAIRS], [p.response_a for p in PAIRS], [p.response_b for p in PAIRS])


def _interrupt_at(monkeypatch, loaded, n: int) -> list:
    """The n-th forward of the judge model (engine or decoder) raises KeyboardInterrupt."""
    hidden, seen = loaded.hidden, []

    def interrupted(*args, **kw):
        seen.append(1)
        if len(seen) == n:
            raise KeyboardInterrupt
        return hidden(*args, **kw)
    monkeypatch.setattr(loaded, "hidden", interrupted)
    return seen


@pytest.mark.parametrize("head", ["default", "with_cot"])
def test_a_call_that_raises_leaves_the_judge_as_a_fresh_one(judge_dir, monkeypatch, head):
    from baer_fast.artifact import default_artifact
    from baer_fast.bank.generative import GenerationConfig
    art = {**default_artifact(), "experts": ["direct", "score", "cot"]} if head == "with_cot" else None
    kw = {"head": art, "kernels": "torch", "generation": GenerationConfig(max_new_tokens={"cot": 3}, seed=1)}
    fresh = Judge.from_pretrained(judge_dir, **kw).score(*QAB)
    j = Judge.from_pretrained(judge_dir, truncate=False, **kw)
    cfg = j.engine.loaded.base.config
    impl = cfg._attn_implementation
    with pytest.raises(InputError):
        j.score(QAB[0][:2], [QAB[1][0], None], QAB[2][:2])
    with pytest.raises(InputError, match="truncate=True"):
        j.score(QAB[0][:2], [QAB[1][0], "word " * 3000], QAB[2][:2])
    for n in (1, 2, 5):                                   # early, mid-call, and (cot) mid-decode
        seen = _interrupt_at(monkeypatch, j.engine.loaded, n)
        with pytest.raises(KeyboardInterrupt):
            j.score(*QAB)
        monkeypatch.undo()
        assert len(seen) == n and cfg._attn_implementation == impl
        assert j.engine.held_outside == 0 and j.engine.prefix_store is None
        assert torch.equal(j.score(*QAB), fresh)
