"""A/B in one process: the per-step loop (before) vs blocks (now), same workload, interleaved."""
import sys, time, tempfile, dataclasses, json
sys.path.insert(0, "benchmarks"); sys.path.append(".")
import bench_decode as bd
from random_judge import load_random
from baer_fast.commands.demo import sample_pairs
from baer_fast.runtime import decode_step
from tests.runtime.test_decode_blocks import _per_step
n, budget, rounds = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
real = decode_step.Blocks.run
with tempfile.TemporaryDirectory() as f:
    loaded = load_random(f, "anchor")
    pairs = sample_pairs(n)
    bd._run(loaded, pairs[:1], 4, False)
    out = {"per_step": [], "blocks": []}
    for _ in range(rounds):
        for name in out:
            decode_step.Blocks.run = _per_step if name == "per_step" else real
            t0 = time.perf_counter()
            rows, dec, rep, st = bd._run(loaded, pairs, budget, False)
            out[name].append({"wall": time.perf_counter() - t0, "gen": st.seconds, "step": st.step_seconds,
                              "fwd": st.step_forward_seconds, "cue": st.cue_seconds, "steps": st.steps})
    print(json.dumps(out))
