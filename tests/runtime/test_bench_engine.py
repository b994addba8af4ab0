"""benchmarks/bench_engine.py on one pair, one round (its numbers, not its timings): the prefix
engine agrees with the naive path, and its FLOP accounting is consistent with the least any exact
engine computes. About 20 s: the anchor model has a 32k vocabulary."""
from tests.fixtures.checks import import_bench


def test_bench_engine_one_pair(tmp_path):
    bench_engine = import_bench("bench_engine")
    res = bench_engine.run(1, 1, str(tmp_path), completions=0, sample_pairs=3, full_bank=4)
    from random_judge import load_random
    from tests.fixtures.tolerances import naive_logprob_error, paths_tol
    loaded = load_random(str(tmp_path))
    # the prefix engine vs the naive path: each within 2x the naive fp32 path's own error vs float64
    assert res["max_abs_logprob_diff"] <= paths_tol(naive_logprob_error(loaded, bench_engine.anchor_groups(loaded, 1)))
    naive, engine = res["rows"][2], res["rows"][3]
    assert (naive["tokens_per_pair"], engine["tokens_per_pair"]) == (10424, 2708)
    # the engine computes more than the least (query slices, packed rows), never less
    assert res["fewer_flops_bank"] <= res["fewer_flops_bank_ceiling"] < res["fewer_tokens_bank"] < 4
    assert res["fewer_flops_anchor"] > 4
    assert 1 < res["fewer_flops_sample"] <= res["fewer_flops_sample_ceiling"]
    # the whole bank's count splits into engine and decoder. The single-pass prompts share the
    # generation prompts' tree (with cot: 2.55x fewer than naive before, when the engine read
    # them), and the engine, reading the rubric and PRePair verdicts with each order's
    # [system][question][A][B] KV from the decoder, prefills neither order's two 500-token
    # responses (3,798.5 tokens a pair before, at 16-token budgets)
    fb = res["full_bank"]
    assert fb["tokens_per_pair"] == fb["engine_tokens_per_pair"] + fb["decoder_tokens_per_pair"]
    assert fb["single_pass_with"]["cot"]["fewer"] > 4
    assert fb["engine_tokens_per_pair"] < 2 * 2 * bench_engine.R_TOKENS
