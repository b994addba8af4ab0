"""`score --model` with a cascade head at its edges (commands/stream.stream_staged): every pair open or
none, a stage 1 that holds every expert, generative stages, the naive engine, duplicates and swaps,
one-pair and one-chunk runs, skipped input lines. Every run is checked against its own files: stage 2
holds exactly the pairs the stage-1 file leaves open, and the scores are the deployed head's on the
merged records, bit for bit."""
from __future__ import annotations

import dataclasses
import json
import os

import pytest

from tests.bank.test_cascade_reuse import PAIRS, PRIDE, _art


@pytest.fixture(scope="module")
def heads(qwen_dir, tmp_path_factory):
    from baer_fast import artifact
    from baer_fast.io.records import write_pairs
    d = tmp_path_factory.mktemp("cascade_edges")
    write_pairs(str(d / "p.jsonl"), PAIRS)
    art = _art(qwen_dir, ["direct", "score", "pride"], ["direct"])
    artifact.save(str(d / "h.json"), art)
    for name, tau in (("all_exit", 0.0), ("all_open", 1e9)):
        artifact.save(str(d / f"{name}.json"), {**art, "cascade": {**art["cascade"], "tau": tau}})
    artifact.save(str(d / "no_rest.json"), _art(qwen_dir, ["direct", "pride"], ["pride"]))
    return d


def _argv(model, d, out, *extra, head="h.json", pairs="p.jsonl", chunk="4") -> list[str]:
    return ["-q", "score", "--model", model, "--input", str(d / pairs), "--head", str(d / head),
            "--out", str(out), "--chunk-pairs", chunk, "--kernels", "torch", *extra]


def _score(model, d, out, *extra, **kw):
    from baer_fast.cli import main
    assert main(_argv(model, d, out, *extra, **kw)) == 0


def _checked(d, out, head="h.json"):
    """(scores, stage-1 records, stage-2 records by id) of a finished run, after checking them together."""
    from baer_fast import artifact
    from baer_fast.bank.runner import apply_derived
    from baer_fast.io.records import read_signals
    from baer_fast.selection.cascade import merge, stage1_head
    art = artifact.load(str(d / head))
    first = read_signals(f"{out}.stage1.signals.jsonl")
    exits = stage1_head(art).exits(first)
    two = f"{out}.stage2.signals.jsonl"
    second = {s.id: s for s in read_signals(two)} if os.path.exists(two) and os.path.getsize(two) else {}
    needs = set(art["experts"]) - set(first[0].experts)        # what stage 2 runs, if anything
    assert set(second) == ({s.id for s, e in zip(first, exits) if not e} if needs else set())   # the open pairs
    merged = [merge(s, second[s.id]) if s.id in second else s for s in first]
    for r in merged:
        if r.id in second:
            assert set(art["experts"]) <= set(r.experts)
            if "pride" in r.experts:        # read from the file's direct runs, with the artifact's parameters
                assert r.experts["pride"] == apply_derived(r.experts, ["pride"], PRIDE)["pride"]
    scores = [json.loads(x) for x in open(out) if x.startswith('{"id"')]
    assert [s["id"] for s in scores] == [s.id for s in first]
    assert [s["score"] for s in scores] == [float(x) for x in artifact.deployed_head(art).score(merged)]
    return scores, first, second


def test_tau_zero_exits_every_pair_and_leaves_an_empty_complete_stage_two(qwen_dir, heads, tmp_path):
    from tests.fixtures.kill_resume import progress
    out = tmp_path / "s.jsonl"
    _score(qwen_dir, heads, out, head="all_exit.json")
    scores, first, second = _checked(heads, out, "all_exit.json")
    assert len(scores) == len(PAIRS) and second == {}
    assert progress(f"{out}.stage2.signals.jsonl")["complete"] is True
    assert all(set(s.experts) == {"direct"} for s in first)


def test_a_huge_tau_opens_every_pair(qwen_dir, heads, tmp_path):
    out = tmp_path / "s.jsonl"
    _score(qwen_dir, heads, out, head="all_open.json")
    _, _, second = _checked(heads, out, "all_open.json")
    assert len(second) == len(PAIRS)


def test_a_stage_one_that_holds_every_expert_writes_no_stage_two_and_keeps_no_kv(qwen_dir, heads, tmp_path,
                                                                                  monkeypatch):
    from baer_fast.bank import prefix_store
    kept, real = [], prefix_store.keeping
    monkeypatch.setattr(prefix_store, "keeping", lambda engine: kept.append(1) or real(engine))
    out = tmp_path / "s.jsonl"
    _score(qwen_dir, heads, out, head="no_rest.json")
    assert kept == []                               # no stage 2 reads it
    _, first, second = _checked(heads, out, "no_rest.json")
    assert second == {} and not os.path.exists(f"{out}.stage2.signals.jsonl")
    assert all(set(s.experts) == {"direct", "pride"} for s in first)


@pytest.mark.parametrize("extra", [["--naive"], ["--batch-invariant"], ["--chunk-pairs", "1"],
                                   ["--chunk-pairs", "100"]], ids=["naive", "batch-invariant", "chunk1", "one-chunk"])
def test_engine_options_and_chunk_sizes_keep_the_stages_together(qwen_dir, heads, tmp_path, extra):
    out = tmp_path / "s.jsonl"
    _score(qwen_dir, heads, out, *extra)
    scores, _, second = _checked(heads, out)
    assert len(scores) == len(PAIRS) and 0 < len(second) < len(PAIRS)


def test_duplicates_and_swaps_share_a_chunk_and_a_verdict(qwen_dir, heads, tmp_path):
    from baer_fast.io.records import write_pairs
    c0, c1 = PAIRS[0], PAIRS[1]
    more = [*PAIRS, dataclasses.replace(c0, id="dup0"),
            dataclasses.replace(c1, id="swap1", response_a=c1.response_b, response_b=c1.response_a)]
    write_pairs(str(heads / "dups.jsonl"), more)
    out = tmp_path / "s.jsonl"
    _score(qwen_dir, heads, out, pairs="dups.jsonl", chunk="3")
    scores, _, second = _checked(heads, out)
    by = {s["id"]: s["score"] for s in scores}
    assert by["dup0"] == by["c0"] and by["swap1"] == -by["c1"]
    assert ("dup0" in second) == ("c0" in second) and ("swap1" in second) == ("c1" in second)


def test_a_skipped_bad_line_leaves_the_other_pairs_staged(qwen_dir, heads, tmp_path):
    lines = [json.dumps(p.to_json()) for p in PAIRS[:5]]
    (heads / "bad.jsonl").write_text("\n".join(lines[:2] + ['{"id": "x", "question": 3}'] + lines[2:]) + "\n")
    out = tmp_path / "s.jsonl"
    _score(qwen_dir, heads, out, "--on-error", "skip", pairs="bad.jsonl")
    scores, _, _ = _checked(heads, out)
    assert [s["id"] for s in scores] == [p.id for p in PAIRS[:5]]


@pytest.mark.slow        # decodes
@pytest.mark.parametrize("full,stage1", [(["direct", "cot"], ["direct"]), (["cot", "direct"], ["cot_native"])],
                         ids=["generative-stage-2", "generative-stage-1"])
def test_generative_stages(qwen_dir, tmp_path, monkeypatch, full, stage1):
    """Each stage's files agree, and a run stopped at its fourth bank call resumes to the same scores."""
    from tests.bank.test_cascade_reuse import REAL_ROWS, _pair_calls
    from tests.fixtures.kill_resume import lines
    from baer_fast import artifact
    from baer_fast.bank import runner
    from baer_fast.bank.generative import GenerationConfig
    from baer_fast.io.records import write_pairs
    art = _art(qwen_dir, full, stage1, GenerationConfig(max_new_tokens={"cot": 4}))
    artifact.save(str(tmp_path / "h.json"), art)
    write_pairs(str(tmp_path / "p.jsonl"), PAIRS)
    out = tmp_path / "s.jsonl"
    _score(qwen_dir, tmp_path, out, "--max-new-tokens", "cot=4")
    _, first, second = _checked(tmp_path, out)
    assert 0 < len(second) < len(PAIRS)
    assert all(s.meta["generation"]["cot"]["max_new_tokens"] == 4 for s in [*first, *second.values()]
               if "cot" in s.experts and "generation" in s.meta)
    stopped = tmp_path / "stopped.jsonl"
    _pair_calls(monkeypatch, fail_at=3)
    with pytest.raises(RuntimeError, match="between a chunk's stages"):
        _score(qwen_dir, tmp_path, stopped, "--max-new-tokens", "cot=4")
    monkeypatch.setattr(runner, "expert_rows", REAL_ROWS)
    _score(qwen_dir, tmp_path, stopped, "--max-new-tokens", "cot=4")
    assert lines(stopped) == lines(out)



def test_a_resumed_chunk_goes_on_to_stage_two_as_its_stage_one_file_says(qwen_dir, heads, tmp_path, monkeypatch):
    """A run stopped between a chunk's stages runs that chunk's stage 1 again (for its KV). Resumed with
    other engine settings (--chunk-pairs, --memory-gb: warned by the writer), those runs may differ from
    the file's in the last bits, and a pair near tau could exit one way and be scored the other (no stage
    2 evidence: p = 0.5). Which pairs go on, and the runs stage 2 derives from, are the file's. Simulated
    by a rerun of stage 1 whose direct runs are all confident: it would let every pair exit."""
    from baer_fast.bank import runner
    from tests.bank.test_cascade_reuse import REAL_ROWS, _pair_calls
    out = tmp_path / "s.jsonl"
    _pair_calls(monkeypatch, fail_at=3)                    # chunk 2's stage 2: its stage 1 is in the file
    with pytest.raises(RuntimeError, match="between a chunk's stages"):
        _score(qwen_dir, heads, out)
    real, again = REAL_ROWS, []

    def confident(engine, pairs, names, report, generation=None, **kw):
        rows = real(engine, pairs, names, report, generation, **kw)
        if names == ["direct"]:
            again.extend(p.id for p in pairs)
            for r in rows:
                r["runs"]["direct"] = [0.999 for _ in r["runs"]["direct"]]
        return rows
    monkeypatch.setattr(runner, "expert_rows", confident)
    _score(qwen_dir, heads, out)
    _, _, second = _checked(heads, out)
    assert again and any(i in second for i in again)        # the file left some of them open


def test_a_resume_with_other_chunks_is_warned_and_keeps_the_stages_together(qwen_dir, heads, tmp_path, monkeypatch,
                                                                            caplog):
    from baer_fast.bank import runner
    from tests.bank.test_cascade_reuse import REAL_ROWS, _pair_calls
    out = tmp_path / "s.jsonl"
    _pair_calls(monkeypatch, fail_at=3)
    with pytest.raises(RuntimeError, match="between a chunk's stages"):
        _score(qwen_dir, heads, out)
    monkeypatch.setattr(runner, "expert_rows", REAL_ROWS)
    with caplog.at_level("WARNING", logger="baer_fast"):
        _score(qwen_dir, heads, out, chunk="3")
    for stage in ("stage1", "stage2"):
        assert f"{out}.{stage}.signals.jsonl: resuming with other engine settings" in caplog.text
    assert "chunk_pairs 4 -> 3" in caplog.text
    scores, _, _ = _checked(heads, out)
    assert len(scores) == len(PAIRS)


@pytest.mark.slow        # three judge processes
def test_sigkill_resumes_to_the_uninterrupted_scores(qwen_dir, heads, tmp_path):
    import subprocess
    import sys

    from tests.fixtures.kill_resume import durable, kill_after_first_batch, lines

    def cmd(out):
        return [sys.executable, "-m", "baer_fast.cli", "-q", "score", "--model", qwen_dir, "--input",
                str(heads / "p.jsonl"), "--head", str(heads / "h.json"), "--out", str(out), "--kernels", "torch",
                "--dtype", "float32", "--device", "cpu", "--chunk-pairs", "2"]
    ref, out = tmp_path / "ref.jsonl", tmp_path / "killed.jsonl"
    subprocess.run(cmd(ref), check=True, capture_output=True, timeout=600)
    done = kill_after_first_batch(cmd(out), f"{out}.stage1.signals.jsonl", timeout_s=600)
    assert 0 < done < len(PAIRS), done
    run = subprocess.run(cmd(out), capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    assert lines(out) == lines(ref)                 # every score, bit for bit, in input order
    assert durable(f"{out}.stage1.signals.jsonl") == len(PAIRS)
    _checked(heads, out)


def test_the_report_after_a_resume_counts_what_ran_and_what_ran_again(qwen_dir, heads, tmp_path, monkeypatch,
                                                                       capsys, caplog):
    """Stopped at chunk 2's stage 2 (chunks of 4): the resume writes stage 1 for chunk 3 and runs chunk 2's
    again for its KV; stage 2 writes chunks 2 and 3's open pairs. The cascade line is over every pair."""
    from baer_fast.bank import runner
    from tests.bank.test_cascade_reuse import REAL_ROWS, _pair_calls
    caplog.set_level("INFO", logger="baer_fast")
    _score(qwen_dir, heads, tmp_path / "whole.jsonl")
    whole = [x for x in caplog.messages if x.startswith("cascade:")]
    out = tmp_path / "s.jsonl"
    calls = _pair_calls(monkeypatch, fail_at=3)
    with pytest.raises(RuntimeError, match="between a chunk's stages"):
        _score(qwen_dir, heads, out)
    open1 = len(calls[1][0])                        # chunk 1's open pairs, in stage 2's file
    monkeypatch.setattr(runner, "expert_rows", REAL_ROWS)
    capsys.readouterr()
    caplog.clear()
    _score(qwen_dir, heads, out)
    err = capsys.readouterr().err
    _, _, second = _checked(heads, out)
    assert "experts (stage 1): 12 pairs (4 run, 8 already done; 4 of those run again with their chunk)" in err
    assert f"experts (stage 2): {len(second)} pairs ({len(second) - open1} run, {open1} already done) in" in err
    assert [x for x in caplog.messages if x.startswith("cascade:")] == whole


def _older_in_progress(model, d, out, stage: str, capsys) -> tuple[list, str]:
    """A finished run whose `stage` file is made one of the older layout (no "chunked"): run again,
    it is read as it is (the same scores); then marked in progress, with --out gone, the run is
    refused -> (the finished run's score lines, the refusal's stderr)."""
    from baer_fast.cli import main
    from tests.fixtures.kill_resume import lines, progress
    _score(model, d, out)
    want = lines(out)
    path = f"{out}.{stage}.signals.jsonl"
    prog = progress(path)
    del prog["fingerprint"]["chunked"]
    with open(path + ".progress.json", "w") as fh:
        json.dump(prog, fh)
    _score(model, d, out)
    assert lines(out) == want
    with open(path + ".progress.json", "w") as fh:
        json.dump({**prog, "complete": False}, fh)
    os.unlink(out)
    os.unlink(f"{out}.progress.json")
    capsys.readouterr()
    assert main(_argv(model, d, out)) == 2
    return want, capsys.readouterr().err


def test_an_older_stage_two_file_is_read_when_complete_and_refused_in_progress(qwen_dir, heads, tmp_path, capsys):
    """Written before the stages ran chunk by chunk (its fingerprint lacks "chunked"): a finished run
    run again reads it as it is; one in progress is refused, naming the file to delete."""
    from tests.fixtures.kill_resume import lines
    out = tmp_path / "s.jsonl"
    want, err = _older_in_progress(qwen_dir, heads, out, "stage2", capsys)
    two = f"{out}.stage2.signals.jsonl"
    assert f"{two}: stage 2 of this run was written by an older baer-fast" in err
    assert f"delete it and {two}.progress.json to run stage 2 again" in err
    assert os.path.exists(f"{out}.stage1.signals.jsonl") and not os.path.exists(out)
    os.unlink(two)
    os.unlink(two + ".progress.json")
    _score(qwen_dir, heads, out)                    # stage 2 run again, from stage 1's file
    assert lines(out) == want


def test_an_older_stage_one_file_is_read_when_complete_and_refused_in_progress(qwen_dir, heads, tmp_path, capsys):
    """Stage 1 now keeps the prompt KV stage 2 reads, which moves its waves under a tight budget: a
    stage-1 file of the older layout is read as it is when complete, and refused in progress."""
    from baer_fast.cli import main
    from tests.fixtures.kill_resume import lines
    out = tmp_path / "s.jsonl"
    want, err = _older_in_progress(qwen_dir, heads, out, "stage1", capsys)
    assert f"{out}.stage1.signals.jsonl: stage 1 of this run was written by an older baer-fast" in err
    assert "--overwrite" in err
    assert main(_argv(qwen_dir, heads, out, "--overwrite")) == 0 and lines(out) == want
