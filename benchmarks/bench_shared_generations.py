"""Reward-loop batches: candidate-blind generations decoded once per call vs once per pair.

Workload: a GRPO-style call on the anchor model (`random_judge.py`, random weights, fp32): Q
questions with G completions each, judged round robin (G(G-1)/2 pairs per question), by the
generative experts whose generations see the question and at most one candidate (reference
solution, rubric, PRePair analyses), one budget for all (random weights rarely emit EOS, so
every row decodes its full budget).

  per pair: every pair's generation requests decoded, as before run_generative merged identical
            requests (bank/generative._distinct replaced by the identity for this arm);
  shared:   identical requests decoded once per call: one reference solution and one rubric per
            question, one PRePair analysis per completion.

Both arms run the same pairs through the same code otherwise (fresh decoder each round). Never
asserts; medians (and min) over rounds, then one JSON line with the decoded tokens, generation
requests, seconds and the largest difference between the two arms' runs.

    python benchmarks/bench_shared_generations.py [--questions 2] [--completions 8] [--budget 32] [--rounds 3]
    python -m pytest benchmarks/bench_shared_generations.py -q      # both arms, pytest-benchmark
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from itertools import combinations

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.append(os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

EXPERTS = ["reference", "rubric", "prepair"]
WORDS = "the answer is correct because python code returns the sum of a list of numbers so".split()


def round_robin_pairs(n_questions: int, n_completions: int, seed: int = 0) -> list:
    from baer_fast.io.records import Pair
    rng = random.Random(seed)
    pairs = []
    for q in range(n_questions):
        question = f"Question {q}: " + " ".join(rng.choice(WORDS) for _ in range(40)) + "?"
        comps = [" ".join(rng.choice(WORDS) for _ in range(60)) for _ in range(n_completions)]
        pairs += [Pair(f"q{q}-{i}-{j}", question, comps[i], comps[j]) for i, j in combinations(range(n_completions), 2)]
    return pairs


def one_arm(loaded, pairs, budget: int, shared: bool) -> dict:
    from baer_fast import protocols
    from baer_fast.bank import generative
    from baer_fast.runtime.decode import Decoder
    from baer_fast.runtime.prefill import PrefixEngine

    config = generative.GenerationConfig(max_new_tokens={n: budget for n in protocols.GENERATIVE})
    real = generative._distinct
    if not shared:
        generative._distinct = lambda batch: (list(batch), list(range(len(batch))))
    try:
        report, decoder = generative.GenerativeReport(), Decoder(loaded)
        t0 = time.perf_counter()
        out = generative.run_generative(PrefixEngine(loaded), pairs, EXPERTS, config=config, decoder=decoder,
                                        report=report)
        seconds = time.perf_counter() - t0
    finally:
        generative._distinct = real
    return {"seconds": seconds, "tokens_decoded": decoder.stats.tokens_decoded,
            "requests": sum(c.calls for c in report.cost.values()), "runs": [row["runs"] for row in out]}


def run(n_questions: int, n_completions: int, budget: int, rounds: int, folder: str) -> dict:
    from random_judge import load_random
    loaded = load_random(folder, "anchor", device="cpu", dtype="float32")
    pairs = round_robin_pairs(n_questions, n_completions)
    arms = {"per_pair": [], "shared": []}
    for _ in range(rounds):
        for name in arms:
            arms[name].append(one_arm(loaded, pairs, budget, shared=name == "shared"))
    diff = max(abs(u - v) for a, b in zip(arms["per_pair"][0]["runs"], arms["shared"][0]["runs"])
               for n in a for u, v in zip(a[n], b[n]) if u is not None and v is not None)
    out = {"bench": "shared_generations", "questions": n_questions, "completions": n_completions,
           "pairs": len(pairs), "budget": budget, "rounds": rounds, "experts": EXPERTS,
           "max_run_difference": diff}
    for name, runs in arms.items():
        times = [r["seconds"] for r in runs]
        out[name] = {"median_s": statistics.median(times), "min_s": min(times),
                     "pairs_per_s": len(pairs) / statistics.median(times),
                     "tokens_decoded": runs[0]["tokens_decoded"], "requests_decoded": runs[0]["requests"]}
        print(f"{name:>9}: {out[name]['median_s']:7.2f} s median ({out[name]['min_s']:.2f} min), "
              f"{out[name]['pairs_per_s']:7.1f} pairs/s, {out[name]['tokens_decoded']:7d} tokens decoded, "
              f"{out[name]['requests_decoded']:5d} generations", file=sys.stderr)
    out["speedup_median"] = out["per_pair"]["median_s"] / out["shared"]["median_s"]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--questions", type=int, default=2)
    ap.add_argument("--completions", type=int, default=8)
    ap.add_argument("--budget", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        print(json.dumps(run(args.questions, args.completions, args.budget, args.rounds, folder)))
    return 0


try:  # the pytest-benchmark face of this file; main() works without pytest
    import pytest
except ImportError:
    pytest = None

if pytest is not None:
    @pytest.fixture(scope="module")
    def anchor(tmp_path_factory):
        """The anchor model and a small round robin, shared by both arms."""
        from random_judge import load_random
        return load_random(str(tmp_path_factory.mktemp("anchor")), "anchor", device="cpu", dtype="float32"), \
            round_robin_pairs(1, 4)

    @pytest.mark.parametrize("arm", ["per_pair", "shared"])
    def test_shared_generations(benchmark, anchor, arm):
        """pytest-benchmark entry: both arms on the same small round robin, side by side in one group."""
        loaded, pairs = anchor
        benchmark.group = "shared_generations"
        benchmark(lambda: one_arm(loaded, pairs, 8, shared=arm == "shared"))


if __name__ == "__main__":
    sys.exit(main())
