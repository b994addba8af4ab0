"""fit, score and eval on signals give the same bytes in any process environment (DESIGN,
determinism): BLAS threads (OMP_NUM_THREADS, MKL_NUM_THREADS), Numba threads (NUMBA_NUM_THREADS,
the router forest's prange) and PYTHONHASHSEED; in each, a swapped file scores exactly -s.
Model runs are the other story (thread counts: test_thread_counts.py)."""
import hashlib
import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = textwrap.dedent("""
    import hashlib, io, contextlib, sys
    from baer_fast.cli import main
    from baer_fast.io.jsonl import iter_jsonl
    from baer_fast.io.records import read_signals, write_signals
    d = sys.argv[1]
    sig, swapped = f"{d}/signals.jsonl", f"{d}/swapped.jsonl"
    write_signals(swapped, [s.swapped() for s in read_signals(sig)])
    digest = []
    for head in ("auto", "route"):
        out, h = f"{d}/{head}.{sys.argv[2]}", f"{d}/{head}.{sys.argv[2]}.head.json"
        assert main(["-q", "fit", "--signals", sig, "--condition", "c", "--out", h, "--head", head]) == 0
        assert main(["-q", "score", "--signals", sig, "--head", h, "--out", out + ".sc.jsonl"]) == 0
        assert main(["-q", "score", "--signals", swapped, "--head", h, "--out", out + ".sw.jsonl"]) == 0
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            assert main(["-q", "eval", "--signals", sig, "--scores", out + ".sc.jsonl", "--head", h, "--json"]) == 0
        s = {o["id"]: o["score"] for _, o in iter_jsonl(out + ".sc.jsonl")}
        w = {o["id"]: o["score"] for _, o in iter_jsonl(out + ".sw.jsonl")}
        assert all(w[i] == -s[i] for i in s), "swap"
        for path in (h, out + ".sc.jsonl"):
            digest.append(hashlib.sha256(open(path, "rb").read()).hexdigest())
        digest.append(hashlib.sha256(buf.getvalue().encode()).hexdigest())
    print("DIGEST", " ".join(digest))
""")
ENVS = {"default": {},
        "threads4": {"OMP_NUM_THREADS": "4", "MKL_NUM_THREADS": "4", "NUMBA_NUM_THREADS": "1", "PYTHONHASHSEED": "1"},
        "threads1": {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "2", "PYTHONHASHSEED": "2"}}


def _digest(tmp_path, name: str, env: dict) -> str:
    clean = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS",
                                                              "NUMBA_NUM_THREADS", "PYTHONHASHSEED")}
    run = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path), name], cwd=ROOT, env={**clean, **env},
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout.split("DIGEST", 1)[1].strip()


def test_fit_score_eval_bytes_do_not_depend_on_threads_or_hash_seed(tmp_path):
    from baer_fast.io.records import write_signals
    from tests.fixtures.data import make_signals
    write_signals(str(tmp_path / "signals.jsonl"), make_signals(200, seed=11))
    got = {name: _digest(tmp_path, name, env) for name, env in ENVS.items()}
    assert len(got["default"].split()) == 6
    assert got["threads4"] == got["default"] and got["threads1"] == got["default"]
    assert hashlib.sha256(b"").hexdigest() not in got["default"]


def test_model_runs_are_the_same_bits_in_another_process_and_hash_seed(qwen_dir, tmp_path):
    """experts in two fresh processes (PYTHONHASHSEED 1 and 2, one thread each): the same signals bytes,
    sampled self_consistency included (the bank orders contents by their text, never by a hash)."""
    from baer_fast.io.records import write_pairs
    from tests.fixtures.prompts import pairs as make_pairs
    write_pairs(str(tmp_path / "pairs.jsonl"), make_pairs(4, seed=6))
    got = []
    for seed in ("1", "2"):
        out = tmp_path / f"signals.{seed}.jsonl"
        env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "PYTHONHASHSEED")}
        run = subprocess.run([sys.executable, "-m", "baer_fast.cli", "-q", "experts", "--model", qwen_dir,
                              "--input", str(tmp_path / "pairs.jsonl"), "--out", str(out), "--experts",
                              "direct,score,cot,self_consistency", "--max-new-tokens", "4", "--seed", "7",
                              "--kernels", "torch"], cwd=ROOT, capture_output=True, text=True, timeout=300,
                             env={**env, "PYTHONHASHSEED": seed, "OMP_NUM_THREADS": "1"})
        assert run.returncode == 0, run.stderr[-3000:]
        got.append(out.read_bytes())
    assert got[0] == got[1] and got[0].count(b"\n") == 4 and b"self_consistency" in got[0]
