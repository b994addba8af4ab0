"""Random bytes and random JSON never crash the JSONL readers: only `InputError`s come out."""
from __future__ import annotations

import json
import os
import tempfile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from baer_fast.commands.eval import load_scores
from baer_fast.errors import InputError
from baer_fast.io.records import read_pairs, read_signals
from baer_fast.io.rejects import Rejects

READERS = (read_pairs, read_signals, lambda path: load_scores(path, ["a", "b"]))
SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
                      st.text(max_size=8), st.sampled_from(["a", "b", "tie", "test", "", "id"]))
json_value = st.recursive(json_leaf, lambda kids: st.one_of(st.lists(kids, max_size=4),
                                                              st.dictionaries(st.text(max_size=6), kids, max_size=4)),
                          max_leaves=12)
field_names = st.sampled_from(["id", "question", "response_a", "response_b", "label", "subset", "split",
                               "meta", "experts", "score", "head"])
record = st.dictionaries(field_names, json_value, max_size=9)
signals_like = st.fixed_dictionaries({"id": st.one_of(st.text(max_size=4), json_leaf),
                                      "experts": st.one_of(json_value, st.dictionaries(
                                          st.text(max_size=3), st.lists(st.one_of(json_leaf, st.floats()),
                                                                        max_size=3), max_size=3))})


def _read_all(data: bytes) -> None:
    fd, path = tempfile.mkstemp(suffix=".jsonl")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        for read in READERS:
            try:
                read(path)
            except InputError:
                pass
        for read in (read_pairs, read_signals):       # the skip policy never raises per line
            try:
                read(path, rejects=Rejects())
            except InputError as e:
                assert "empty file" in str(e)
    finally:
        os.unlink(path)


@SETTINGS
@given(st.binary(max_size=300))
def test_random_bytes(data):
    _read_all(data)


@SETTINGS
@given(st.lists(st.one_of(record, signals_like, json_value), max_size=5), st.booleans())
def test_random_json_lines(objs, trailing_newline):
    text = "\n".join(json.dumps(o) for o in objs) + ("\n" if trailing_newline else "")
    _read_all(text.encode())


@SETTINGS
@given(st.lists(st.one_of(record, signals_like), min_size=1, max_size=4), st.integers(0, 400))
def test_cut_and_spliced_lines(objs, cut):
    data = ("\n".join(json.dumps(o) for o in objs) + "\n").encode()
    _read_all(data[:cut] + b"\xff[{\"" + data[cut:])


def test_pathological_lines():
    for raw in (b"[" * 100_000, b'{"id": 1' + b"0" * 5000 + b"}", b'{"id": "x", "experts": {"d": [1' + b"0" * 5000 + b"]}}",
                b"\x00\x00", b'"just a string"', b"1e400", b'{"id": "a", "score": 1e400}'):
        _read_all(raw + b"\n")
