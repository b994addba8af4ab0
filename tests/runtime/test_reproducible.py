"""Run-to-run reproducibility of CPU GEMMs (runtime/reproducible.py): `import baer_fast` turns on
MKL's CNR mode before torch's MKL starts, so the same bank run twice in one process gives the
same bits, with one OpenMP thread too (without it, measured here: ~5e-8 on every generative
expert's runs, other tokens for self_consistency)."""
import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _python(code: str, **env) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k != "MKL_CBWR"}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, env={**clean, **env},
                          capture_output=True, text=True, timeout=300)


def _has_mkl() -> bool:
    from baer_fast.runtime.reproducible import cnr_branch
    return cnr_branch() is not None


def test_this_suite_runs_with_cnr_on():
    """The suite's own process (conftest imports torch first): the mode must be on here too, or
    every exactness test below stands on luck."""
    from baer_fast.runtime.reproducible import check, cnr_branch
    if not _has_mkl():
        pytest.skip("torch without MKL: nothing to switch")
    assert cnr_branch() != 1 and check()


def test_import_sets_the_mode_and_a_late_import_is_reported():
    if not _has_mkl():
        pytest.skip("torch without MKL: nothing to switch")
    on = _python("""
        import torch, baer_fast
        from baer_fast.runtime.reproducible import cnr_branch
        a = torch.randn(64, 64); a @ a
        print(cnr_branch())""")
    assert on.returncode == 0, on.stderr
    assert int(on.stdout.split()[-1]) != 1
    late = _python("""
        import torch
        a = torch.randn(64, 64); a @ a          # MKL starts here, before baer_fast
        import baer_fast
        from baer_fast.runtime.reproducible import check, cnr_branch
        print(cnr_branch(), check())""")
    assert late.returncode == 0, late.stderr
    assert late.stdout.split()[-2:] == ["1", "False"]
    assert "MKL_CBWR=AUTO" in late.stderr                    # the warning says what to do
    user = _python("""
        import baer_fast, os
        print(os.environ["MKL_CBWR"])""", MKL_CBWR="COMPATIBLE")
    assert user.stdout.split()[-1] == "COMPATIBLE"          # a user's own setting wins


def test_same_bank_twice_in_one_process_same_bits_on_one_thread():
    """The regression: one OpenMP thread, every generative expert, the same pairs three times."""
    run = _python("""
        import tempfile
        from baer_fast import protocols
        from baer_fast.bank.generative import GenerationConfig
        from baer_fast.bank.runner import run_experts
        from baer_fast.runtime.open import load_judge
        from tests.fixtures.prompts import pairs as make_pairs
        from tests.fixtures.tiny_models import build_model_dir
        loaded = load_judge(build_model_dir(tempfile.mkdtemp(), arch="qwen3", seed=0))
        names = list(protocols.GENERATIVE)
        gen = GenerationConfig(max_new_tokens={n: 8 for n in names}, seed=7)
        ps = make_pairs(4, seed=1)
        runs = [[s.experts for s in run_experts(loaded, ps, experts=names, generation=gen)] for _ in range(3)]
        print("SAME" if runs[0] == runs[1] == runs[2] else "DIFFERENT")""", OMP_NUM_THREADS="1")
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split()[-1] == "SAME"
