"""The progress helper, and odd-looking inputs that are valid and must be accepted."""
from __future__ import annotations

import io
import json

from baer_fast.io.records import read_pairs, read_signals
from baer_fast.progress import progress


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_progress_quiet_prints_nothing():
    s = _Tty()
    with progress(10, desc="score", quiet=True, stream=s) as bar:
        bar.update(10)
    assert s.getvalue() == ""


def test_progress_not_a_tty_logs_lines_with_rate_and_eta():
    s = io.StringIO()
    with progress(100, desc="score", stream=s, every_s=1e9, every_frac=0.25) as bar:
        for _ in range(10):
            bar.update(10)
    lines = s.getvalue().splitlines()
    assert 4 <= len(lines) <= 6
    assert lines[0].startswith("score: 30/100 pairs (30%)") or lines[0].startswith("score: 20/100")
    assert "pairs/s" in lines[0] and "ETA" in lines[0]
    assert lines[-1].startswith("score: 100/100 pairs (100%)")


def test_progress_on_a_tty_is_a_tqdm_bar():
    s = _Tty()
    with progress(50, desc="experts", stream=s, initial=10) as bar:
        bar.update(40)
    out = s.getvalue()
    assert "experts" in out and "50/50" in out and "pair/s" in out


def test_progress_with_a_delay_says_nothing_for_short_work(monkeypatch):
    # fit's and the budget search's folds: work done within the delay prints nothing, not even a last line
    clock = iter([0.0, 1.0, 2.0, 3.0])
    monkeypatch.setattr("baer_fast.progress.time.monotonic", lambda: next(clock))
    s = io.StringIO()
    with progress(2, desc="fit", stream=s, every_s=0.0, delay=10.0) as bar:
        bar.update()
        bar.update()
    assert s.getvalue() == ""


def test_progress_with_a_delay_speaks_once_it_has_passed(monkeypatch):
    clock = iter([0.0, 4.0, 11.0, 12.0, 30.0, 31.0])
    monkeypatch.setattr("baer_fast.progress.time.monotonic", lambda: next(clock))
    s = io.StringIO()
    with progress(4, desc="fit", stream=s, unit="fold", every_s=100.0, every_frac=1.0, delay=10.0) as bar:
        bar.set_postfix_str("stack")
        for _ in range(4):      # at t = 4 (quiet), 11 (the first line), 12 (period not over), 30 (the last)
            bar.update()
    lines = s.getvalue().splitlines()
    assert [ln.split(",")[0] for ln in lines] == ["fit: 2/4 folds (50%)", "fit: 4/4 folds (100%)"], lines
    assert lines[0].endswith(", stack")


def test_progress_slower_than_one_per_second_gives_seconds_per_unit(monkeypatch):
    # a 50k-row fold takes minutes: "0.0 folds/s" said nothing
    clock = iter([0.0, 40.0, 80.0])
    monkeypatch.setattr("baer_fast.progress.time.monotonic", lambda: next(clock))
    s = io.StringIO()
    with progress(4, desc="budget search", stream=s, unit="fold", every_s=0.0) as bar:
        bar.update()
        bar.update()
    assert s.getvalue().splitlines()[0] == "budget search: 1/4 folds (25%), 40.0 s/fold, ETA 2:00"


def test_progress_on_a_tty_passes_the_delay_to_tqdm():
    s = _Tty()
    with progress(5, desc="fit", stream=s, delay=1e9) as bar:
        bar.update(5)
    assert s.getvalue() == ""


def _write(tmp_path, name, data: bytes) -> str:
    p = tmp_path / name
    p.write_bytes(data)
    return str(p)


def test_ten_megabyte_response_is_valid(tmp_path):
    big = "x" * (10 * 1024 * 1024)
    rec = {"id": "big", "question": "q", "response_a": big, "response_b": "short", "label": "b"}
    pairs = read_pairs(_write(tmp_path, "big.jsonl", (json.dumps(rec) + "\n").encode()))
    assert len(pairs[0].response_a) == len(big)


def test_odd_but_valid_pairs_are_accepted(tmp_path):
    lines = [
        {"id": "empty-responses", "question": "q", "response_a": "", "response_b": ""},
        {"id": "empty-question", "question": "", "response_a": "a", "response_b": "b"},
        {"id": "tie", "question": "q", "response_a": "a", "response_b": "b", "label": "tie"},
        {"id": "unicode-✓", "question": "日本語 \u2028 line sep", "response_a": "😀", "response_b": "\x00"},
        {"id": "null-optionals", "question": "q", "response_a": "a", "response_b": "b", "label": None,
         "subset": None, "split": None, "meta": None},
    ]
    data = b"\n".join(json.dumps(x, ensure_ascii=False).encode() for x in lines[:2]) + b"\r\n\n   \n"
    data += b"\n".join(json.dumps(x, ensure_ascii=False).encode() for x in lines[2:])   # no final newline
    pairs = read_pairs(_write(tmp_path, "ok.jsonl", data))
    assert [p.id for p in pairs] == [x["id"] for x in lines]
    assert pairs[2].label == "tie" and pairs[4].label is None and pairs[4].subset == "default"
    assert [p.line for p in pairs] == [1, 2, 5, 6, 7]


def test_odd_but_valid_signals_are_accepted(tmp_path):
    rec = {"id": "s", "label": "tie", "meta": {}, "experts": {"d": [None, None], "c": [0, 1, 0.5], "z": [1e-300, 1.0]}}
    sig = read_signals(_write(tmp_path, "s.jsonl", (json.dumps(rec) + "\n").encode()))
    assert sig[0].experts["d"] == [None, None] and sig[0].label == "tie"
