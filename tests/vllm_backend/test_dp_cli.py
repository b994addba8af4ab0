"""`baer-fast experts --backend vllm --data-parallel-size 2` == one replica, through the real CLI.

Two real replicas (spawned processes, one CPU core each here) against one: the same signals in
the same order within eps32 x layers x (hidden + prompt) (forward_tol: replicas batch other pairs
together, and vLLM has no float64 path), the generative experts' texts identical (greedy and seeded samples).
Runs only where `vllm` is importable (benchmarks/vllm_parity.sh); three engine starts, about
2-3 minutes on 2 CPU cores.
"""
import pytest

pytest.importorskip("vllm")

EXPERTS = "direct,score,pointwise,cot,self_consistency"


def _run(cli, argv, out, *extra):
    assert cli.main(argv + list(extra) + ["--out", out]) == 0


def test_data_parallel_signals_equal_one_replica(hd64_model_dir, tmp_path):
    from baer_fast import cli
    from baer_fast.io.jsonl import iter_jsonl
    from baer_fast.io.records import read_signals, write_pairs
    from tests.fixtures.tiny_models import make_pairs
    pairs = make_pairs(9, seed=8, long=2)
    from baer_fast.runtime.open import load_judge
    from tests.fixtures.tolerances import forward_tol
    tol = forward_tol(load_judge(hd64_model_dir, device="cpu", dtype="float32"), pairs)
    src = str(tmp_path / "pairs.jsonl")
    write_pairs(src, pairs)
    argv = ["experts", "--backend", "vllm", "--model", hd64_model_dir, "--input", src, "--experts", EXPERTS,
            "--max-new-tokens", "8", "--keep-texts", "--chunk-pairs", "5", "-q", "--dtype", "float32"]
    one, two = str(tmp_path / "dp1.jsonl"), str(tmp_path / "dp2.jsonl")
    _run(cli, argv, one)
    _run(cli, argv, two, "--data-parallel-size", "2")
    a, b = read_signals(one), read_signals(two)
    # both in input order (computed in content order, bank/canonical.py), every pair once
    assert [r.id for r in a] == [r.id for r in b] and sorted(r.id for r in a) == sorted(p.id for p in pairs)
    for x, y in zip(a, b):
        assert x.experts.keys() == y.experts.keys() and y.meta["engine"] == "vllm"
        for name in x.experts:
            runs = list(zip(x.experts[name], y.experts[name], strict=True))
            assert all((u is None) == (v is None) for u, v in runs), name        # native experts: null when unparsed
            assert max((abs(u - v) for u, v in runs if u is not None), default=0.0) <= tol, name
        assert x.meta["generation"] == y.meta["generation"]
    texts = [[r for _, r in iter_jsonl(f + ".texts.jsonl") if "id" in r] for f in (one, two)]
    assert texts[0] == texts[1] and len(texts[0]) == len(pairs)
