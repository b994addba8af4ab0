"""One Judge called from several threads at once (async reward workers): no call overlaps another
on the model, and each gets the scores it would get alone."""
from __future__ import annotations

import threading
import time

import torch

from tests.fixtures.data import synthetic_pairs


def test_threads_share_a_judge_one_call_at_a_time(default_judge, monkeypatch):
    """A forward switches the shared model config's attention implementation for its call
    (runtime/model/load.py `hidden`); two at once could run each other's attention (seen: a
    KeyError 'baer_width_groups' mid-forward and a silent, permanent fall back to one width)."""
    judge, loaded = default_judge, default_judge.engine.loaded
    cfg = loaded.base.config
    impl = cfg._attn_implementation
    pairs = synthetic_pairs(24, seed=5)
    batches = [pairs[k:k + 6] for k in range(0, 24, 6)]

    def score(batch):
        return judge.score([p.question for p in batch], [p.response_a for p in batch], [p.response_b for p in batch])
    alone = [score(b) for b in batches]
    hidden, guard, inside, peak = loaded.hidden, threading.Lock(), [0], [0]

    def watched(*args, **kwargs):
        with guard:
            inside[0] += 1
            peak[0] = max(peak[0], inside[0])
        try:
            time.sleep(0.01)                 # gives another thread every chance to enter meanwhile
            return hidden(*args, **kwargs)
        finally:
            with guard:
                inside[0] -= 1
    monkeypatch.setattr(loaded, "hidden", watched)
    start, got, errors = threading.Barrier(len(batches)), {}, []

    def work(k):
        try:
            start.wait()
            got[k] = score(batches[k])
        except Exception as e:              # noqa: BLE001 - reported below
            errors.append(e)
    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(batches))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors and not any(t.is_alive() for t in threads)
    assert peak[0] == 1
    assert all(torch.equal(got[k], alone[k]) for k in range(len(batches)))
    assert cfg._attn_implementation == impl
