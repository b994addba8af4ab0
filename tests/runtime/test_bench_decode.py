"""benchmarks/bench_decode.py on one real-length pair (its numbers, not its timings): the batched
decoder's greedy experts agree with HF `generate` and with the decoder whose steps attend over the
widest row, and its decode counters are consistent."""
from tests.fixtures.checks import import_bench


def test_bench_decode_one_sample_pair(tmp_path):
    bench_decode = import_bench("bench_decode")
    res = bench_decode.run(1, 1, 4, str(tmp_path), sample=True, unsplit=True)
    from random_judge import load_random

    from baer_fast.commands.demo import sample_pairs
    from tests.fixtures.tolerances import readout_tol
    # same greedy tokens, so the verdicts differ by the readout's rounding: 2x the naive fp32
    # path's own error vs float64 on this pair's single-pass prompts, for each of two paths
    tol = readout_tol(load_random(str(tmp_path)), sample_pairs(1))
    assert res["sample"] and res["max_abs_u_diff_greedy_experts"] <= tol
    assert res["max_abs_u_diff_split_unsplit"] <= tol and len(res["rows"]) == 3
    s, u = res["decoder_stats"], res["unsplit_decoder_stats"]
    assert s["scores_decoded"] >= s["scores_decoded_own"] > 0 and s["scores_prefilled"] > 0
    assert s["scores_decoded_own"] == u["scores_decoded_own"] and s["scores_decoded"] <= u["scores_decoded"]
    f = res["floor"]
    assert 0 < f["step_forward_s"] <= f["step_s"] and f["decoded_gflop"] > 0 and f["floor_s"] > 0
