"""Pruning per pair subset (`fit --budget B --per-subset`): the budget spent where each subset needs it."""
from __future__ import annotations

import json
import random
from dataclasses import replace

import numpy as np
import pytest

from baer_fast import artifact
from baer_fast.cli import main
from baer_fast.heads.allocation import allocate, experts_for
from baer_fast.io.records import Signals, write_signals
from baer_fast.io.splits import SplitSpec
from baer_fast.scoring import missing_evidence
from baer_fast.selection.allocation import run_allocated, space_for
from baer_fast.selection.budget import fit_budget, plan_budget

from tests.selection.cost_synth import assert_same_saved, bank, blank_test_labels

# each cheap expert is right on one subset only; the expensive one on both
ACCURACY = {"x": {"cheap_x": 0.95, "cheap_y": 0.5, "huge": 0.8}, "y": {"cheap_x": 0.5, "cheap_y": 0.95, "huge": 0.8}}
COST = {"cheap_x": 100, "cheap_y": 100, "huge": 900}


def two_subsets(n: int = 100, seed: int = 0) -> list:
    out = []
    for k, (g, acc) in enumerate(sorted(ACCURACY.items())):
        out += [replace(r, id=f"{g}-{r.id}", subset=g) for r in bank(n, seed=seed + k, accuracy=acc, cost=COST)]
    return out


@pytest.fixture(scope="module")
def records():
    return two_subsets()


def test_each_subset_gets_the_expert_that_is_right_there_within_the_budget(records):
    # 0.15 of 1100 per pair: one cheap expert for every pair (100) fits, both do not (200); per subset
    # each half of the pairs can run its own cheap expert (50 + 50)
    plain = plan_budget(records, "0.15")
    alloc = plan_budget(records, "0.15", space_for=space_for)
    assert len(plain["experts"]) == 1 and "allocation" not in plain
    assert "cheap_x" in alloc["allocation"]["x"] and "cheap_y" in alloc["allocation"]["y"]
    assert alloc["experts"] == sorted({e for es in alloc["allocation"].values() for e in es})
    limit = 0.15 * alloc["full_cost_per_pair"]
    assert alloc["cost_per_pair"] <= limit + 1e-9
    assert alloc["full_cost_per_pair"] == pytest.approx(plain["full_cost_per_pair"])
    # the cost is the pairs' average: each subset's share times what its experts cost on its rows
    spent = sum(alloc["subset_shares"][g] * alloc["subset_costs"][g] for g in alloc["allocation"])
    assert alloc["cost_per_pair"] == pytest.approx(spent)
    assert alloc["cv_accuracy"] >= plain["cv_accuracy"] + 0.15
    assert any(v["experts"] == ["cheap_x@x", "cheap_y@y"] for v in alloc["visited"])


def test_with_one_subset_it_is_the_plain_search():
    records = bank(150, seed=1)
    plain, alloc = plan_budget(records, "0.33"), plan_budget(records, "0.33", space_for=space_for)
    assert alloc["allocation"] == {"default": plain["experts"]}
    assert {k: v for k, v in alloc.items() if k not in ("allocation", "subset_shares")} == plain


def test_the_head_scores_only_the_allocated_evidence_and_stays_antisymmetric(records):
    art = fit_budget(records, "0.15", condition="c", space_for=space_for)
    assert art["allocation"] == art["budget"]["allocation"]
    head = artifact.deployed_head(art)
    s = np.asarray(head.score(records))
    # scoring signals of the whole bank = scoring what `score --model` runs (each subset's experts only)
    assert np.array_equal(s, np.asarray(head.score(allocate(records, art["allocation"], art["experts"]))))
    assert not np.array_equal(s, np.asarray(artifact.deployed_head({**art, "allocation": None}).score(records)))
    assert np.all(np.abs(s + np.asarray(head.score([r.swapped() for r in records]))) <= 1e-9)


def test_artifact_ignores_test_labels_and_row_order(records, tmp_path):
    spec = SplitSpec()
    a = fit_budget(records, "0.2", condition="c", spec=spec, space_for=space_for)
    assert_same_saved(tmp_path, a, fit_budget(blank_test_labels(records, spec), "0.2", condition="c", spec=spec,
                                              space_for=space_for))
    shuffled = list(records)
    random.Random(3).shuffle(shuffled)
    assert plan_budget(shuffled, "0.2", space_for=space_for) == a["budget"]


def test_an_unseen_subset_runs_every_chosen_expert_and_missing_counts_the_allocated_only():
    alloc, union = {"x": ["cheap_x"], "y": []}, ["cheap_x", "huge"]
    assert experts_for(alloc, union, "y") == [] and experts_for(alloc, union, "z") == union
    recs = [Signals("1", {"cheap_x": [0.7, 0.6]}, "x"), Signals("2", {}, "y"), Signals("3", {"huge": [0.4]}, "z")]
    art = {"experts": union, "allocation": alloc}
    assert missing_evidence(art, recs) == 1           # only pair 3's cheap_x: pair 2 runs nothing by design
    assert missing_evidence({"experts": union}, recs) == 4


def test_run_allocated_runs_each_group_once_and_keeps_pair_order():
    pairs = [Signals(str(i), {}, g) for i, g in enumerate("xyzxy")]
    art = {"experts": ["a", "b"], "allocation": {"x": ["a"], "y": ["a", "b"]}}
    calls = []

    def run(some, names, k):
        calls.append(([p.id for p in some], names, k))
        return [replace(p, experts={n: [0.5] for n in names}) for p in some]
    out = run_allocated(art, pairs, run)
    assert [r.id for r in out] == [p.id for p in pairs]
    assert [sorted(r.experts) for r in out] == [["a"], ["a", "b"], ["a", "b"], ["a"], ["a", "b"]]
    assert calls == [(["0", "3"], ["a"], 0), (["1", "2", "4"], ["a", "b"], 1)]   # z is unseen: every expert


def test_cli_per_subset(records, tmp_path, capsys):
    path = tmp_path / "s.jsonl"
    write_signals(str(path), records)
    head = tmp_path / "h.json"
    assert main(["-q", "fit", "--signals", str(path), "--condition", "c", "--out", str(head),
                 "--budget", "0.15", "--per-subset"]) == 0
    out = capsys.readouterr().out
    assert "subset x (" in out and "% of the rows): cheap_x" in out and "subset y (" in out, out
    art = json.loads(head.read_text())
    assert set(art["allocation"]) == {"x", "y"}
    assert main(["-q", "score", "--signals", str(path), "--head", str(head), "--out", str(tmp_path / "sc.jsonl")]) == 0
    assert "0 (pair, expert) cells had no evidence" in capsys.readouterr().out
    assert main(["-q", "frontier", "--signals", str(path), "--budget", "0.15", "--per-subset"]) == 0
    out = capsys.readouterr().out
    marked = [line for line in out.splitlines() if line.startswith("* ")]
    assert len(marked) == 2 and all("cheap_x@x" in line and "cheap_y@y" in line for line in marked), out
    for extra, word in ((["--cascade"], "--cascade"), ([], "--budget")):
        args = ["-q", "fit", "--signals", str(path), "--condition", "c", "--out", str(tmp_path / "bad.json"),
                "--per-subset"] + (["--budget", "0.5"] if extra else []) + extra
        assert main(args) == 2
        assert word in capsys.readouterr().err
        assert not (tmp_path / "bad.json").exists()


def test_an_allocation_is_versioned_and_checked_at_load(records, tmp_path):
    from baer_fast.errors import ArtifactError
    art = fit_budget(records, "0.15", condition="c", space_for=space_for)
    artifact.save(str(tmp_path / "a.json"), art)
    artifact.save(str(tmp_path / "p.json"), {k: v for k, v in art.items() if k != "allocation"})
    assert artifact.load(str(tmp_path / "a.json"))["schema_version"] == 3      # a v2 reader would ignore it: refused
    assert artifact.load(str(tmp_path / "p.json"))["schema_version"] == 2
    artifact.save(str(tmp_path / "bad.json"), {**art, "allocation": {"x": ["not_an_expert"]}})
    with pytest.raises(ArtifactError, match="field 'allocation'"):
        artifact.load(str(tmp_path / "bad.json"))


def test_score_model_and_judge_run_each_subset_its_own_experts(qwen_dir, tmp_path, monkeypatch, caplog):
    from baer_fast.api import Judge
    from baer_fast.bank import runner
    from baer_fast.commands import score as score_cmd
    from baer_fast.io.records import write_pairs
    from tests.fixtures.data import PER_SUBSET, per_subset_head
    from tests.fixtures.tolerances import HEAD_OPS, fp64_tol
    pairs = per_subset_head(qwen_dir, str(tmp_path / "h.json"))
    write_pairs(str(tmp_path / "p.jsonl"), pairs)
    seen, made, real = [], [], score_cmd._bank

    def counting(args, art, ps, names, stage):
        seen.append(([p.subset for p in ps], list(names), stage))
        made.extend(real(args, art, ps, names, stage))
        return made[-len(ps):]
    monkeypatch.setattr(score_cmd, "_bank", counting)
    assert main(["-q", "score", "--model", qwen_dir, "--input", str(tmp_path / "p.jsonl"),
                 "--head", str(tmp_path / "h.json"), "--out", str(tmp_path / "s.jsonl")]) == 0
    assert seen == [(["x"] * 6, ["direct"], "subset0"), (["y"] * 6, ["direct", "score"], "subset1")]
    got = {json.loads(line)["id"]: json.loads(line)["score"] for line in open(tmp_path / "s.jsonl")
           if line.startswith("{\"id")}
    deployed = artifact.deployed_head(artifact.load(str(tmp_path / "h.json")))
    assert [got[r.id] for r in made] == [float(s) for s in deployed.score(made)]
    assert all(sorted(r.experts) == PER_SUBSET[r.subset] for r in made)
    # pairs of a subset the head was not pruned for run every expert, and the run says so
    write_pairs(str(tmp_path / "z.jsonl"), [replace(p, subset="z") for p in pairs[:2]])
    with caplog.at_level("WARNING", logger="baer_fast"):
        assert main(["-q", "score", "--model", qwen_dir, "--input", str(tmp_path / "z.jsonl"),
                     "--head", str(tmp_path / "h.json"), "--out", str(tmp_path / "z.scores.jsonl")]) == 0
    assert seen[-1] == (["z", "z"], ["direct", "score"], "subset0")
    assert "2 of 2 pairs are of subset 'z'" in caplog.text
    caplog.clear()

    calls = []
    real_run = runner.run_experts
    monkeypatch.setattr(runner, "run_experts", lambda eng, some, experts, **kw: calls.append(list(experts))
                        or real_run(eng, some, experts=experts, **kw))
    judge = Judge.from_pretrained(qwen_dir, head=str(tmp_path / "h.json"), kernels="torch")
    texts = [p.question for p in pairs], [p.response_a for p in pairs], [p.response_b for p in pairs]
    subsets = [p.subset for p in pairs]
    # given each pair's subset, the Judge runs what `score --model` runs and scores it the same way
    # (the records are those of the score call itself: a second model run need not repeat its bits)
    made_by_judge, own_signals = [], judge.signals
    monkeypatch.setattr(judge, "signals", lambda *a, **kw: made_by_judge.append(own_signals(*a, **kw))
                        or made_by_judge[-1])
    s = judge.score(*texts, subsets=subsets).numpy()
    runs = made_by_judge[-1]
    assert calls == [["direct"], ["direct", "score"]]
    assert [(r.subset, sorted(r.experts)) for r in runs] == [(p.subset, PER_SUBSET[p.subset]) for p in pairs]
    assert np.array_equal(s, deployed.score(runs))
    swapped = judge.score(texts[0], texts[2], texts[1], subsets=subsets).numpy()
    assert np.all(np.abs(s + swapped) <= fp64_tol(HEAD_OPS, 1 + np.abs(s)))
    # the subset is what the head reads: the same texts as subset x score differently from y
    assert not np.allclose(judge.score(*texts, subsets="x").numpy(), judge.score(*texts, subsets="y").numpy())
    # without subsets (or with one it has not seen) every expert it chose runs, with one warning
    calls.clear()
    with caplog.at_level("WARNING", logger="baer_fast"):
        assert judge.score(["Is 7 prime?"], ["7 is prime"], ["7 is not prime"]).shape == (1,)
        judge.score(["Is 7 prime?"], ["7 is prime"], ["7 is not prime"], subsets=["z"])
    assert calls == [["direct", "score"]] * 2
    assert caplog.text.count("pruned per subset") == 1 and "subsets=" in caplog.text


@pytest.mark.parametrize("subsets, needle", [(["x"], "1 values for 2 pairs"), (["x", ""], "entry 1"),
                                             (["x", 3], "entry 1"), (7, "got int")])
def test_judge_subsets_are_checked_and_named(subsets, needle):
    from baer_fast.errors import InputError
    from baer_fast.io.records import per_pair
    with pytest.raises(InputError, match=f"field 'subsets': .*{needle}"):
        per_pair(subsets, 2, "subsets", "default")
    assert per_pair(None, 2, "subsets", "default") == ["default"] * 2
    assert per_pair(["x", None], 2, "categories", None) == ["x", None]


def test_the_lazy_search_visits_what_the_full_greedy_steps_visit_here_with_fewer_fits(records, monkeypatch):
    """On this bank the gains shrink as the allocation grows, so the lazy steps are the exact ones; the
    lazy search needs a fraction of the fits (each candidate once per step otherwise)."""
    from baer_fast.selection import allocation
    from baer_fast.selection.budget import CostModel, SubsetCV

    class Exact(allocation.AllocationSpace):
        lazy = False
    fits = []
    real = SubsetCV.scores
    monkeypatch.setattr(SubsetCV, "scores", lambda self, key: fits.append(tuple(sorted(key))) or real(self, key))
    model = CostModel(outer_repeats=0)
    lazy = plan_budget(records, "0.6", space_for=space_for, model=model)
    n_lazy, fits[:] = len(set(fits)), []
    exact = plan_budget(records, "0.6", space_for=lambda *a: Exact(*a), model=model)
    assert lazy["visited"] == exact["visited"] and lazy["moves"] == exact["moves"]
    assert n_lazy < len(set(fits))


def test_the_search_benchmark_times_both_steps_on_the_same_bank(capsys):
    from tests.fixtures.checks import import_bench
    bench = import_bench("bench_allocation_search")
    assert bench.synthetic_bank(2, 3, 30) == bench.synthetic_bank(2, 3, 30)          # seeded
    assert bench.main(["--subsets", "2", "--experts", "3", "--rows", "40", "--budget", "0.4"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert 0 < out["lazy_fits"] <= out["full_fits"] and isinstance(out["same_allocation"], bool)


def test_a_per_subset_head_is_no_transfer_source(records, caplog):
    """Its member would score every pair on every expert, not its subset's: on LLMBar CaseStudy a per-subset
    GPT-4 head pooled for ChatGPT flipped the sign of 30% of the pairs against the same head deployed."""
    import logging
    from baer_fast.errors import InputError
    from baer_fast.selection.budget import fit_stack, labelled_rows
    from baer_fast.selection.transfer import fit_transfer

    pruned = fit_budget(records, "0.15", condition="c", space_for=space_for)
    rows, roles, y = labelled_rows(records, SplitSpec())
    plain, _ = fit_stack(rows, y, roles, experts=["cheap_x", "cheap_y", "huge"], categories=["x", "y"])
    plain = {"condition": "p", "head": "stack", "experts": ["cheap_x", "cheap_y", "huge"],
             "heads": {"stack": plain.to_json()}}
    target = [replace(r, label=None) for r in two_subsets(30, seed=50)]
    with caplog.at_level(logging.WARNING, logger="baer_fast"):
        art = fit_transfer(target, [("per_subset.json", pruned), ("plain.json", plain)], condition="t")
    assert [m["source"] for m in art["heads"]["pooled"]["members"]] == ["plain.json"]
    assert "per_subset.json is pruned per subset" in caplog.text
    with pytest.raises(InputError, match="per_subset.json is pruned per subset"):
        fit_transfer(target, [("per_subset.json", pruned)], condition="t")
