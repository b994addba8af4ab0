"""Per-expert cost accounting of a bank run sums to the runtime's own counters exactly."""
from __future__ import annotations

import pytest

from baer_fast.bank.costs import fit_to_total
from baer_fast.io.records import Pair


def _pairs(n):
    qs = ["Which is prime, 7 or 8?", "Explain why the sum is even.", "Which is prime, 7 or 8?"]
    return [Pair(f"c{i}", qs[i % 3], f"answer {i} is seven", f"response {i * 3} is eight because", label="a")
            for i in range(n)]


@pytest.mark.parametrize("naive", [False, True])
def test_single_pass_shares_sum_to_engine_counter(qwen_dir, naive):
    from baer_fast.bank.costs import prefill_shares
    from baer_fast.bank.runner import RunReport, run_experts
    from baer_fast.runtime.open import HfOptions, open_engine
    engine = open_engine(qwen_dir, options=HfOptions(naive=naive))
    rep, names = RunReport(), ["direct", "score", "pointwise"]
    sig = run_experts(engine, _pairs(5), experts=names, report=rep)
    cells = [c for s in sig for c in s.meta["expert_cost"].values()]
    assert sum(c["prefilled"] for c in cells) == rep.stats.tokens_prefilled
    assert all(c["decoded"] == 0 for c in cells)
    assert all(c["prefilled"] > 0 for c in cells)
    # the shares come from the plan itself, not from the final rescaling to the counter
    w = prefill_shares(engine, _pairs(5), names)[0]
    assert [{k: s.meta["expert_cost"][k]["prefilled"] for k in d} for s, d in zip(sig, w)] == w
    if naive:      # each prompt whole: the per-pair counter too
        assert [sum(c["prefilled"] for c in s.meta["expert_cost"].values()) for s in sig] == \
            [s.meta["tokens_naive"] for s in sig]


def test_generative_decoded_and_prefill_sum_to_counters(qwen_dir):
    from baer_fast.bank.generative import GenerationConfig
    from baer_fast.bank.runner import RunReport, run_experts
    rep = RunReport()
    sig = run_experts(qwen_dir, _pairs(3), experts=["direct", "cot"], report=rep,
                      generation=GenerationConfig(max_new_tokens={"cot": 6}))
    cost = [s.meta["expert_cost"] for s in sig]
    assert sum(c["cot"]["decoded"] for c in cost) == sum(c.tokens_decoded for c in rep.generative.cost.values())
    assert sum(c["cot"]["decoded"] for c in cost) > 0 and all(c["direct"]["decoded"] == 0 for c in cost)
    total = rep.stats.tokens_prefilled + rep.generative.decode_prefilled
    assert sum(c[n]["prefilled"] for c in cost for n in c) == total


def test_the_experts_command_records_the_tokens_and_no_wall_time(qwen_dir, tmp_path):
    """`experts` writes meta.expert_cost too (what `fit --budget` and the cascade read), the same
    tokens the in-process run charges, without "seconds": its files are the same bytes run to run."""
    from baer_fast.bank.runner import run_experts
    from baer_fast.cli import main
    from baer_fast.io.records import read_signals, write_pairs
    pairs, names = _pairs(4), ["direct", "cot"]
    write_pairs(str(tmp_path / "p.jsonl"), pairs)
    outs = []
    for k in range(2):
        out = tmp_path / f"s{k}.jsonl"
        assert main(["-q", "experts", "--model", qwen_dir, "--input", str(tmp_path / "p.jsonl"), "--out", str(out),
                     "--experts", ",".join(names), "--max-new-tokens", "6"]) == 0
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]
    got = {s.id: s.meta["expert_cost"] for s in read_signals(str(tmp_path / "s0.jsonl"))}
    from baer_fast.bank.generative import GenerationConfig
    want = run_experts(qwen_dir, pairs, experts=names, generation=GenerationConfig(max_new_tokens={"cot": 6}))
    for s in want:
        assert got[s.id] == {n: {k: v for k, v in c.items() if k != "seconds"} for n, c in s.meta["expert_cost"].items()}
        assert got[s.id]["cot"]["decoded"] > 0 == got[s.id]["direct"]["decoded"]


@pytest.mark.parametrize("names", [["direct", "pride", "calibraeval"], ["pride", "score"]])
def test_the_experts_command_prices_derived_experts_as_run_experts_does(qwen_dir, tmp_path, names):
    """With derived experts and no --derived-params, `experts` runs in two phases; its final file
    must still give pride a cost cell (0 "from" direct, or direct's prompts when direct is not in
    the bank), else `fit --budget` / `--cascade` on the default bank stop: "'pride' has no cost"."""
    from baer_fast.bank.runner import run_experts
    from baer_fast.cli import main
    from baer_fast.io.records import read_signals, write_pairs
    pairs = [Pair(p.id, p.question, p.response_a, p.response_b, label=p.label, split=("selection", "test")[i % 2])
             for i, p in enumerate(_pairs(6))]
    write_pairs(str(tmp_path / "p.jsonl"), pairs)
    out = str(tmp_path / "s.jsonl")
    assert main(["-q", "experts", "--model", qwen_dir, "--input", str(tmp_path / "p.jsonl"), "--out", out,
                 "--experts", ",".join(names)]) == 0
    got = {s.id: s.meta["expert_cost"] for s in read_signals(out)}
    for s in run_experts(qwen_dir, pairs, experts=names):
        assert got[s.id] == {n: {k: v for k, v in c.items() if k != "seconds"} for n, c in s.meta["expert_cost"].items()}


def test_fit_to_total_is_exact_and_keeps_matching_shares():
    w = [{"a": 3, "b": 1}, {"a": 2, "b": 0}]
    assert fit_to_total(w, 6) == w
    for total in (0, 1, 7, 11, 1000):
        got = fit_to_total(w, total)
        assert sum(v for d in got for v in d.values()) == total


def _cascade_head(qwen_dir, path, pairs):
    """A two-stage head on `pairs` (direct, then score): its saved path and the runs of the bank."""
    import numpy as np

    from baer_fast import artifact
    from baer_fast.bank import runner
    from baer_fast.selection.budget import expert_costs, fit_stack
    from baer_fast.selection.cascade import CascadeSpec, fit_cascade
    from baer_fast.selection.costs import shared_costs, subset_cost
    sig = runner.run_experts(qwen_dir, pairs, experts=["direct", "score"])
    rows = [s for s in sig if s.split != "test"]
    y = np.array([1.0 if s.label == "a" else -1.0 for s in rows])
    full, _ = fit_stack(rows, y, [s.split for s in rows], experts=["direct", "score"], categories=["default"])
    costs, _ = expert_costs(rows, ["direct", "score"])
    shared = shared_costs(rows)             # a single expert still prefills the prompt prefix it shares
    cheap = f"tokens={min(subset_cost(costs, [e], None, shared) for e in costs) * 1.000001!r}"   # one expert
    art = fit_cascade(sig, {"condition": "c", "head": "stack", "experts": ["direct", "score"],
                            "heads": {"stack": full.to_json()}}, cascade=CascadeSpec(cheap, 0.0))
    art["cascade"]["stage1_experts"] = ["direct"]
    stage1, _ = fit_stack(rows, y, [s.split for s in rows], experts=["direct"], categories=["default"])
    art["cascade"]["stage1"] = stage1.to_json()
    conf = np.round(np.abs(stage1.score(sig)), 9)
    lo, hi = np.sort(conf)[5:7]
    art["cascade"]["tau"] = float((lo + hi) / 2)             # half the pairs exit, away from the boundary
    artifact.save(path, art)
    return path, sig


def _labelled(n):
    return [Pair(p.id, p.question, p.response_a, p.response_b, label="ab"[i % 2],
                 split=("selection", "calibration")[i % 2] if i < 8 else "test") for i, p in enumerate(_pairs(n))]


def _record_stages(monkeypatch):
    """Wrap `score --model`'s per-stage expert writes: [(pairs, experts, records)] as each stage's chunk ran."""
    from baer_fast.commands.stream import SignalStream
    real, made = SignalStream.write, []

    def recording(self, chunk, rows):
        made.append((list(chunk), list(self.names), real(self, chunk, rows)))
        return made[-1][2]
    monkeypatch.setattr(SignalStream, "write", recording)
    return made


@pytest.mark.slow        # loads the tiny judge twice (the bank, then `score --model`)
def test_score_model_runs_stage_two_only_where_the_cascade_needs_it(qwen_dir, tmp_path, monkeypatch):
    import json

    from baer_fast import artifact
    from baer_fast.cli import main
    from baer_fast.io.records import write_pairs
    from baer_fast.selection.cascade import merge
    pairs = _labelled(12)
    path, sig = _cascade_head(qwen_dir, str(tmp_path / "h.json"), pairs)
    head = artifact.deployed_head(artifact.load(path))
    exits = head.exits(sig)
    assert exits.any() and not exits.all()
    write_pairs(str(tmp_path / "p.jsonl"), pairs)
    made = _record_stages(monkeypatch)
    assert main(["-q", "score", "--model", qwen_dir, "--input", str(tmp_path / "p.jsonl"),
                 "--head", path, "--out", str(tmp_path / "s.jsonl")]) == 0
    assert [(len(ps), names) for ps, names, _ in made] == [(12, ["direct"]), (int((~exits).sum()), ["score"])]
    got = [json.loads(line)["score"] for line in open(tmp_path / "s.jsonl") if line.startswith("{\"id")]
    # the scores are the cascade's on exactly the runs the two stages produced
    first, second = ({r.id: r for r in recs} for _, _, recs in made)      # each in content order
    staged = [merge(first[p.id], second[p.id]) if p.id in second else first[p.id] for p in pairs]
    assert got == [float(x) for x in head.score(staged)]
    assert [("score" in r.experts) for r in staged] == [not e for e in exits]


@pytest.mark.slow        # loads the tiny judge twice, and prefills a pair the length of its context
def test_score_model_truncate_cuts_a_pair_once_for_every_stage(qwen_dir, tmp_path, monkeypatch):
    """--truncate on a cascade: the over-long pair is cut once, to the room the head's whole bank
    leaves, as `Judge` cuts it; both stages read the same texts (not each its own stage's cut)."""
    import dataclasses

    from baer_fast import artifact
    from baer_fast.bank.truncation import fit_pair, room_for
    from baer_fast.cli import main
    from baer_fast.io.records import write_pairs
    from baer_fast.runtime.model.load import tokenizer_and_context
    path, _ = _cascade_head(qwen_dir, str(tmp_path / "h.json"), _labelled(12))
    art = artifact.load(path)
    art["cascade"]["tau"] = 1e9                          # every pair goes on to stage 2
    artifact.save(path, art)
    pairs = _labelled(3)
    pairs[1] = dataclasses.replace(pairs[1], response_b="seven is prime because " * 1500)
    write_pairs(str(tmp_path / "p.jsonl"), pairs)
    made = _record_stages(monkeypatch)
    assert main(["-q", "score", "--model", qwen_dir, "--input", str(tmp_path / "p.jsonl"), "--truncate",
                 "--head", path, "--out", str(tmp_path / "s.jsonl")]) == 0
    tok, ctx, _ = tokenizer_and_context(qwen_dir)
    want = fit_pair(tok, pairs[1].question, pairs[1].response_a, pairs[1].response_b,
                    room=room_for(tok, ctx, ["direct", "score"]))
    assert want.truncated
    assert [names for _, names, _ in made] == [["direct"], ["score"]]
    for ps, _, _ in made:
        long = next(p for p in ps if p.id == pairs[1].id)
        assert (long.question, long.response_a, long.response_b) == \
            (want.question, want.response_a, want.response_b)
        assert long.meta.get("truncated") is True


@pytest.mark.parametrize("naive", [False, True])
def test_a_subset_costs_what_running_it_alone_prefills(qwen_dir, naive):
    """The experts' prompts share each order's [system][question][A][B]: a subset's cost, added up from
    the full bank's records (selection/costs.subset_cost with meta.prefill_shared), is what running the
    subset alone prefills, token for token; the full bank's own cost is unchanged. Before, the subset
    was charged only its experts' equal parts of the shared nodes (direct: about half of a run alone)."""
    from baer_fast.bank.runner import run_experts
    from baer_fast.runtime.open import HfOptions, open_engine
    from baer_fast.selection.costs import expert_costs, expert_sources, shared_costs, subset_cost
    engine = open_engine(qwen_dir, options=HfOptions(naive=naive))
    pairs = [Pair(f"d{i}", q, f"answer {i} is seven", f"response {i * 3} is eight because", label="a")
             for i, q in enumerate(["Which is prime, 7 or 8?", "Explain why the sum is even.", "Name a colour."])]
    names = ["direct", "score", "pointwise", "pride"]
    full = run_experts(engine, pairs, experts=names)
    costs, _ = expert_costs(full, names)
    sources, shared = expert_sources(full, names), shared_costs(full)
    assert (shared is None) == naive                               # the naive engine shares nothing
    assert subset_cost(costs, names, sources, shared) == pytest.approx(sum(costs.values()))
    for sub in (["direct"], ["score"], ["pointwise"], ["direct", "score"], ["pride"], ["pride", "pointwise"]):
        alone = run_experts(engine, pairs, experts=sub)
        spent = sum(c["prefilled"] for r in alone for c in r.meta["expert_cost"].values()) / len(pairs)
        assert subset_cost(costs, sub, sources, shared) == pytest.approx(spent), sub


def test_a_generative_bank_is_priced_call_by_call(qwen_dir, monkeypatch):
    """With generative experts the single-pass prompts ride in the decoder's prompt tree (one over the
    call, across questions), and the engine then reads the verdicts that follow the generations (the
    reference's, rubric's and PRePair's; the last two from the [system][question][A][B] KV the decoder
    hands over). Each call's tree is priced, so the shares are the counters before any rescaling (one
    wave here), and a subset costs what running it alone prefills and decodes, token for token. Before,
    one tree per question without the verdict reads came to 3,335 tokens of the 4,512 counted here, the
    rest spread in proportion. Not exact (docs/cost.md): a subset whose verdicts lose the handed-over KV
    (reference or rubric without an expert whose prompt holds the pair), or of single-pass experts only
    (the engine alone, one tree per question)."""
    from baer_fast.bank import costs as bank_costs
    from baer_fast.bank.generative import GenerationConfig
    from baer_fast.bank.runner import run_experts
    from baer_fast.runtime.open import open_engine
    from baer_fast.selection.costs import expert_costs, expert_sources, shared_costs, subset_cost
    engine = open_engine(qwen_dir)
    pairs = [Pair(f"g{i}", q, f"answer {i} is seven", f"response {i * 3} is eight because", label="a")
             for i, q in enumerate(["Which is prime, 7 or 8?", "Explain why the sum is even.", "Name a colour."])]
    gen = GenerationConfig(max_new_tokens={n: 4 for n in ("cot", "rubric", "prepair", "deliberate", "reference")})
    names = ["direct", "score", "cot", "deliberate", "rubric", "prepair", "reference"]
    fitted = []
    real = bank_costs.fit_to_total
    monkeypatch.setattr(bank_costs, "fit_to_total",
                        lambda w, total: fitted.append((sum(v for d in w for v in d.values()), total)) or real(w, total))
    full = run_experts(engine, pairs, experts=names, generation=gen)
    assert fitted[0][0] == fitted[0][1]
    costs, _ = expert_costs(full, names)
    sources, shared = expert_sources(full, names), shared_costs(full)
    assert subset_cost(costs, names, sources, shared) == pytest.approx(sum(costs.values()))
    for sub in (["cot"], ["direct", "cot"], ["score", "cot", "deliberate"], ["cot", "rubric"], ["direct", "prepair"],
                ["cot", "rubric", "reference"]):
        alone = run_experts(engine, pairs, experts=sub, generation=gen)
        spent = sum(c["prefilled"] + c["decoded"] for r in alone for c in r.meta["expert_cost"].values()) / len(pairs)
        assert subset_cost(costs, sub, sources, shared) == pytest.approx(spent), sub
    assert all(have == total for have, total in fitted), fitted


def test_the_experts_command_prices_a_derived_expert_without_its_source(qwen_dir, tmp_path):
    """`experts --experts pride,score`: pride takes direct's cell (direct is not in the file), and its
    place in the shared prompt nodes, so pride alone still costs what running it prefills."""
    from baer_fast.bank.runner import run_experts
    from baer_fast.cli import main
    from baer_fast.io.records import read_signals, write_pairs
    from baer_fast.selection.costs import expert_costs, expert_sources, shared_costs, subset_cost
    pairs = [Pair(f"d{i}", q, f"answer {i} is seven", f"response {i * 3} is eight because", label="a",
                  split=("selection", "calibration", "test")[i])
             for i, q in enumerate(["Which is prime, 7 or 8?", "Explain why the sum is even.", "Name a colour."])]
    write_pairs(str(tmp_path / "p.jsonl"), pairs)
    out = tmp_path / "s.jsonl"
    assert main(["-q", "experts", "--model", qwen_dir, "--input", str(tmp_path / "p.jsonl"), "--out", str(out),
                 "--experts", "pride,score"]) == 0
    sig = read_signals(str(out))
    shared = shared_costs(sig)
    assert shared is not None and all("direct" not in e for e in shared.sets) and "direct" not in shared.parts
    costs, _ = expert_costs(sig, ["pride", "score"])
    alone = run_experts(qwen_dir, pairs, experts=["pride"])
    spent = sum(c["prefilled"] for r in alone for c in r.meta["expert_cost"].values()) / len(pairs)
    assert subset_cost(costs, ["pride"], expert_sources(sig, ["pride", "score"]), shared) == pytest.approx(spent)
    assert subset_cost(costs, ["pride", "score"], None, shared) == pytest.approx(sum(costs.values()))


def test_cascade_records_what_stage_two_costs_when_it_prefills_again(qwen_dir, tmp_path):
    """A cascade on a runtime bank: stage 2 shares each order's prompt prefix with stage 1. Judge hands
    it over (expected_cost_per_pair); run on its own (score --model) stage 2 prefills it again, and the
    artifact says what that costs: running stage 2's experts alone (within 5%: these pairs share
    questions, whose nodes the engine splits among the pairs of a call, exact on distinct questions)."""
    from baer_fast import artifact
    from baer_fast.bank.runner import run_experts
    pairs = _labelled(12)
    path, sig = _cascade_head(qwen_dir, str(tmp_path / "h.json"), pairs)
    c = artifact.load(path)["cascade"]
    test = [p for p in pairs if p.split != "test"]
    alone = run_experts(qwen_dir, test, experts=["score"])
    assert c["stage2_alone_cost_per_pair"] == pytest.approx(
        sum(r.meta["expert_cost"]["score"]["prefilled"] for r in alone) / len(alone), rel=0.05)
    assert c["stage2_alone_cost_per_pair"] > c["full_cost_per_pair"] - c["stage1_cost_per_pair"]
    assert c["expected_cost_per_pair_prefilled_again"] > c["expected_cost_per_pair"]
