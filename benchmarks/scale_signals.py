"""Synthetic signals (and scores) files at scale, for profiling `frontier` and `eval` (seeded, no real data).

    python benchmarks/scale_signals.py --pairs 20000 --out /tmp/sig20k.jsonl [--scores /tmp/sc20k.jsonl]

Ten experts shaped like the demo's LLMBar bank (two runs per expert, one per display order): hard 0/1
verdicts for some, soft probabilities for others, a few runs missing, accuracies 0.55-0.80 varying by
subset. Four subsets, three categories, 1% tie labels, 1% unlabelled, pair statistics and per-expert
`meta.expert_cost` (tokens) so the budget search prices the experts. --scores also writes a scores
file (a noisy mean of the experts) so `eval` can run without fitting.
"""
from __future__ import annotations

import argparse
import json

import numpy as np

EXPERTS = ("CoT", "Metrics", "Metrics_Reference", "Reference", "Swap", "Swap_CoT", "Vanilla",
           "Vanilla_1shot", "Vanilla_2shot", "Vanilla_NoRules")
SUBSETS = ("Natural", "Adversarial_GPTInst", "Adversarial_Neighbor", "Adversarial_Manual")
CATEGORIES = ("chat", "code", "math")


def pair(i: int, rng: np.random.Generator) -> dict:
    label = "a" if rng.random() < 0.5 else "b"
    roll = rng.random()
    sign = 1.0 if label == "a" else -1.0
    g = int(rng.integers(len(SUBSETS)))
    runs, cost = {}, {}
    for k, name in enumerate(EXPERTS):
        acc = 0.55 + 0.025 * k + (0.08 if (k + g) % 4 == 0 else 0.0)
        hard = k % 3 != 1
        out = []
        for _ in range(2):
            if rng.random() < 0.02:
                out.append(None)
                continue
            right = rng.random() < acc
            u = 0.5 + sign * (0.5 if right else -0.5) if hard else \
                float(np.clip(0.5 + sign * (0.3 if right else -0.3) + rng.normal(0, 0.15), 0.0, 1.0))
            out.append(round(u, 6))
        runs[name] = out
        cost[name] = {"prefilled": int(300 + 120 * k + rng.integers(0, 50)), "decoded": 40 * (k % 3)}
    meta = {"condition": "synthetic-scale", "len_q": int(rng.integers(5, 1500)),
            "len_a": int(rng.integers(10, 900)), "len_b": int(rng.integers(10, 900)),
            "code_a": int(rng.integers(0, 3)), "code_b": int(rng.integers(0, 3)),
            "list_a": int(rng.integers(0, 6)), "list_b": int(rng.integers(0, 6)),
            "digits_a": int(rng.integers(0, 30)), "digits_b": int(rng.integers(0, 30)), "expert_cost": cost}
    rec = {"id": f"syn-{i:07d}", "subset": SUBSETS[g], "category": CATEGORIES[i % 3], "meta": meta,
           "experts": runs}
    if roll >= 0.02:
        rec["label"] = label
    elif roll >= 0.01:
        rec["label"] = "tie"
    return rec


def score_of(rec: dict, rng: np.random.Generator) -> dict:
    vals = [u for runs in rec["experts"].values() for u in runs if u is not None]
    s = float(np.mean(vals) - 0.5 + rng.normal(0, 0.05)) if vals else 0.0
    if rng.random() < 0.01:
        s = 0.0                                   # a few exact ties
    return {"id": rec["id"], "score": round(s, 6), "p_a": round(1 / (1 + np.exp(-s)), 6),
            "winner": "a" if s >= 0 else "b", "head": "stack", "expert": None, "condition": "synthetic-scale"}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--scores", default=None)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    sc = open(args.scores, "w", encoding="utf-8") if args.scores else None
    with open(args.out, "w", encoding="utf-8") as fh:
        for i in range(args.pairs):
            rec = pair(i, rng)
            fh.write(json.dumps(rec, separators=(",", ":")) + "\n")
            if sc:
                sc.write(json.dumps(score_of(rec, rng), separators=(",", ":")) + "\n")
    if sc:
        sc.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
