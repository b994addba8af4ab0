"""Max swap / duplicate / batch-order / batch-composition differences of every expert (CPU fp32,
a tiny model dir: tests/fixtures/tiny_models.build_model_dir), and the bank's throughput.

usage: python benchmarks/symmetry_check.py MODEL_DIR [--batch-invariant] [--repeats N] [--detail FILE]

Cases (each the max |u - u'| over experts and runs, after mirroring where swapped):
  swap_other_batch, swap_same_batch, duplicate_same_batch, shuffled_batch: same contents;
  alone_vs_batch: a pair run alone vs in the base batch; beside_other_pairs: a pair run beside
  other pairs (new contents, some sharing its question) vs in the base batch.
Throughput: pairs/s of the whole bank (every expert, 6-token budgets) and of the single-pass
bank on the base batch, medians of --repeats runs. Never asserts. The per-expert maxima go to
stderr (and to --detail FILE); stdout is ONE JSON line: each case's max over experts, and the speeds.
"""
import argparse
import json
import os
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from baer_fast import protocols                                 # noqa: E402
from baer_fast.bank.generative import GenerationConfig          # noqa: E402
from baer_fast.bank.runner import RunReport, run_experts        # noqa: E402
from baer_fast.io.records import Pair                           # noqa: E402
from baer_fast.runtime.open import load_judge, open_engine      # noqa: E402
from tests.fixtures.prompts import pairs as mkpairs             # noqa: E402

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("model", metavar="MODEL_DIR", help="a local model directory (e.g. a tiny one from build_model_dir)")
ap.add_argument("--batch-invariant", action="store_true", help="run the bank batch-invariant")
ap.add_argument("--repeats", type=int, default=3, help="timed runs per throughput figure (default 3)")
ap.add_argument("--detail", metavar="FILE", help="also write the per-expert maxima of every case there (JSON)")
args = ap.parse_args()

names = list(protocols.ALL)
gen = GenerationConfig(max_new_tokens={n: 6 for n in protocols.GENERATIVE}, seed=3)
P = mkpairs(5, seed=4)
# other pairs: new contents, two of them asking P's questions (they share its prefix KV when batched)
others = mkpairs(4, seed=11) + [Pair(f"q{i}", P[i].question, "another answer", "a third one") for i in (0, 2)]
eng = open_engine(load_judge(args.model))
params = None


def run(ps, experts=names):
    global params
    rep = RunReport()
    out = run_experts(eng, ps, experts=experts, derived_params=params if experts is names else None,
                      generation=gen, report=rep, batch_invariant=args.batch_invariant)
    if experts is names:
        params = rep.derived_params
    return out


def diff(x, y):
    m = {}
    for k in x.experts:
        d = [abs(a - b) for a, b in zip(x.experts[k], y.experts[k]) if a is not None and b is not None]
        d += [float("inf") for a, b in zip(x.experts[k], y.experts[k]) if (a is None) != (b is None)]
        m[k] = max(d, default=0.0)
    return m


def worst(acc, m):
    for k, v in m.items():
        acc[k] = max(acc.get(k, 0.0), v)


def timed(experts):
    times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        run(P, experts)
        times.append(time.perf_counter() - t0)
    return len(P) / statistics.median(times)


base = run(P)
cases = ("swap_other_batch", "swap_same_batch", "duplicate_same_batch", "shuffled_batch", "alone_vs_batch",
         "beside_other_pairs")
res = {c: {} for c in cases}
sw = run([Pair("s" + p.id, p.question, p.response_b, p.response_a) for p in P])
for a, b in zip(base, sw):
    worst(res["swap_other_batch"], diff(a.swapped(), b))
n = len(P)
mixed = run(P + [Pair("x" + p.id, p.question, p.response_b, p.response_a) for p in P]
            + [Pair("d" + p.id, p.question, p.response_a, p.response_b) for p in P])
for i in range(n):
    worst(res["swap_same_batch"], diff(mixed[i].swapped(), mixed[n + i]))
    worst(res["duplicate_same_batch"], diff(mixed[i], mixed[2 * n + i]))
perm = list(range(n))
random.Random(1).shuffle(perm)
sh = run([Pair("p" + P[k].id, P[k].question, P[k].response_a, P[k].response_b) for k in perm])
for j, k in enumerate(perm):
    worst(res["shuffled_batch"], diff(base[k], sh[j]))
for i, p in enumerate(P):
    worst(res["alone_vs_batch"], diff(base[i], run([p])[0]))
for i in (0, 2, 4):          # P[i] beside other contents (and swapped, under another id)
    got = run(others[:3] + [Pair("o" + P[i].id, P[i].question, P[i].response_b, P[i].response_a)] + others[3:])
    worst(res["beside_other_pairs"], diff(base[i].swapped(), got[3]))
speed = {"bank_pairs_per_s": timed(names), "single_pass_pairs_per_s": timed(list(protocols.SINGLE_PASS))}
print(json.dumps(res), file=sys.stderr)            # per case, per expert: the detail behind the line below
if args.detail:
    with open(args.detail, "w", encoding="utf-8") as fh:
        json.dump(res, fh, indent=1)
print(json.dumps({"batch_invariant": args.batch_invariant, **{k: max(v.values()) for k, v in res.items()},
                  **{k: round(v, 3) for k, v in speed.items()}}))
