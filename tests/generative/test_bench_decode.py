"""benchmarks/bench_decode.py on one real-length pair (its numbers, not its timings): the batched
decoder's greedy experts agree with HF `generate`, and its decode counters are consistent."""
import os
import sys

BENCH = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks")


def test_bench_decode_one_sample_pair(tmp_path):
    sys.path.insert(0, BENCH)
    try:
        import bench_decode
    finally:
        sys.path.remove(BENCH)
    res = bench_decode.run(1, 1, 4, str(tmp_path), sample=True)
    assert res["sample"] and res["max_abs_u_diff_greedy_experts"] < 1e-4
    s = res["decoder_stats"]
    assert s["scores_decoded"] >= s["scores_decoded_own"] > 0 and s["scores_prefilled"] > 0
