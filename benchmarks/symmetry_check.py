"""Max swap / duplicate / batch-order differences of every expert (CPU fp32, a tiny model dir:
tests/fixtures/tiny_models.build_model_dir). usage: python benchmarks/symmetry_check.py MODEL_DIR
Ends with ONE JSON line: the max difference per case over all experts."""
import json, random, sys
from baer_fast.io.records import Pair
from baer_fast.bank.runner import run_experts
from baer_fast.bank.generative import GenerationConfig
from baer_fast import protocols
import os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from tests.fixtures.prompts import pairs as mkpairs

model = sys.argv[1]
names = [n for n in protocols.ALL] + [n for n in ("cot_native", "self_consistency_native", "deliberate_native") if n in protocols.ALL]
names = list(dict.fromkeys(names))
gen = GenerationConfig(max_new_tokens={n: 6 for n in protocols.GENERATIVE}, seed=3)
P = mkpairs(5, seed=4)
params = None
def run(ps):
    global params
    from baer_fast.bank.runner import RunReport
    rep = RunReport()
    out = run_experts(model, ps, experts=names, derived_params=params, generation=gen, report=rep)
    params = rep.derived_params
    return out
from baer_fast.runtime.open import load_judge
from baer_fast.runtime.open import open_engine
eng = open_engine(load_judge(model))
model = eng
base = run(P)
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
res = {"swap_other_batch": {}, "swap_same_batch": {}, "duplicate_same_batch": {}, "shuffled_batch": {}, "alone_vs_batch": {}}
sw = run([Pair("s" + p.id, p.question, p.response_b, p.response_a) for p in P])
for a, b in zip(base, sw):
    worst(res["swap_other_batch"], diff(a.swapped(), b))
mixed = run(P + [Pair("x" + p.id, p.question, p.response_b, p.response_a) for p in P] + [Pair("d" + p.id, p.question, p.response_a, p.response_b) for p in P])
n = len(P)
for i in range(n):
    worst(res["swap_same_batch"], diff(mixed[i].swapped(), mixed[n + i]))
    worst(res["duplicate_same_batch"], diff(mixed[i], mixed[2 * n + i]))
perm = list(range(n)); random.Random(1).shuffle(perm)
sh = run([Pair("p" + P[k].id, P[k].question, P[k].response_a, P[k].response_b) for k in perm])
for j, k in enumerate(perm):
    worst(res["shuffled_batch"], diff(base[k], sh[j]))
for i, p in enumerate(P):
    worst(res["alone_vs_batch"], diff(base[i], run([p])[0]))
print(json.dumps(res, indent=0))
print(json.dumps({k: max(v.values()) for k, v in res.items()}))
