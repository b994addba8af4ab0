"""Row order (DESIGN, determinism): the same pairs listed in another order give the same results.

fit puts rows in id order (its own test: tests/invariants/test_leakage_determinism.py); here the
commands after it: `score` gives each id the same record, and `eval` the same output, byte for byte,
including its bootstrap intervals and float sums, whichever order the signals and scores files
list the pairs in.
"""
import json
import random

from baer_fast.io.jsonl import iter_jsonl, write_jsonl


def _shuffled(src: str, dst, seed: int) -> str:
    rows = [obj for _, obj in iter_jsonl(src)]
    random.Random(seed).shuffle(rows)
    write_jsonl(str(dst), rows)
    return str(dst)


def test_eval_is_the_same_bytes_for_any_row_order(cli, llmbar, tmp_path):
    outs = []
    for seed in (None, 1, 2):
        sig, sc = llmbar["signals"], llmbar["scores"]
        if seed is not None:
            sig, sc = _shuffled(sig, tmp_path / f"sig{seed}.jsonl", seed), _shuffled(sc, tmp_path / f"sc{seed}.jsonl", seed + 10)
        code, out, err = cli("-q", "eval", "--signals", sig, "--scores", sc, "--head", llmbar["head"],
                             "--split", "all", "--json")
        assert code == 0, err
        outs.append(out)
    assert json.loads(outs[0])["accuracy_ci"]["head"]["low"] is not None     # the bootstrap ran
    assert outs[1] == outs[0] and outs[2] == outs[0]


def test_score_gives_each_id_the_same_record_for_any_row_order(cli, llmbar, tmp_path):
    by_id = []
    for seed in (None, 3):
        sig = llmbar["signals"] if seed is None else _shuffled(llmbar["signals"], tmp_path / "sig.jsonl", seed)
        out = tmp_path / f"scores{seed}.jsonl"
        code, _, err = cli("-q", "score", "--signals", sig, "--head", llmbar["head"], "--out", out)
        assert code == 0, err
        by_id.append({obj["id"]: obj for _, obj in iter_jsonl(str(out))})
    assert by_id[0] == by_id[1] and len(by_id[0]) > 50
