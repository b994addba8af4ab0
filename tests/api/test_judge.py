import torch

from baer_fast.api import Judge
from baer_fast.errors import BaerError

import pytest

from tests.fixtures.tolerances import HEAD_OPS, fp64_tol

Q = ["what is the sum of a list?", "is the code correct?", "explain why"]
A = ["the sum is 10", "yes the python code returns the sum", ""]
B = ["it returns a list", "no", "because the answer is correct"]


def test_scores_are_antisymmetric(judge):
    s = judge.score(Q, A, B)
    s_swapped = judge.score(Q, B, A)
    assert s.shape == (3,) and s.dtype == torch.float64
    # the signals mirror bit for bit (bank/canonical.py); the float64 head negates up to its rounding
    assert torch.max(torch.abs(s + s_swapped)) <= fp64_tol(HEAD_OPS, 1 + float(s.abs().max()))
    p = judge.prob_a(Q, A, B)
    torch.testing.assert_close(p, torch.sigmoid(s))


def test_deterministic_and_batch_independent(judge):
    full = judge.score(Q, A, B)
    assert torch.equal(full, judge.score(Q, A, B))
    one = torch.cat([judge.score([q], [a], [b]) for q, a, b in zip(Q, A, B)])
    # other batches round other ways (padding widths, shared prefixes): each batching may be off
    # from the float64 scores by twice what the naive fp32 path is (tests/fixtures/tolerances.py)
    from tests.fixtures.tolerances import naive_score_error, paths_tol
    tol = paths_tol(naive_score_error(judge.engine.loaded, judge.art, Q, A, B), float(full.abs().max()))
    torch.testing.assert_close(one, full, atol=tol, rtol=0)


def test_signals_expose_the_runs(judge):
    sig = judge.signals(Q[:1], A[:1], B[:1])
    assert set(sig[0].experts) == set(judge.experts)
    assert all(0.0 <= u <= 1.0 for runs in sig[0].experts.values() for u in runs if u is not None)


def test_every_pair_gets_a_score_even_for_hostile_text(judge):
    huge = "word " * 2_000_000                                # 10 MB
    weird = "bad \udcff surrogate and \x00 nul and emoji \U0001F600"
    s = judge.score(["q", "q", huge[:50_000]], [huge, "", weird], ["short", weird, ""])
    assert s.shape == (3,) and torch.all(torch.isfinite(s))
    swapped = judge.score(["q", "q", huge[:50_000]], ["short", weird, ""], [huge, "", weird])
    assert torch.max(torch.abs(s + swapped)) <= fp64_tol(HEAD_OPS, 1 + float(s.abs().max()))   # truncation is symmetric


def test_empty_batch(judge):
    assert judge.score([], [], []).shape == (0,)


def test_vllm_backend_not_built_says_so(judge_dir, head_path):
    with pytest.raises(BaerError, match="vLLM backend is not built"):
        Judge.from_pretrained(judge_dir, head=head_path, backend="vllm")


def test_vllm_options_reach_the_engine(judge_dir, head_path, monkeypatch):
    """Judge passes data/tensor parallel sizes to the vLLM engine; dtype overrides unless auto."""
    from baer_fast.runtime import open as open_mod
    from baer_fast.runtime.vllm import backend as vllm_backend
    seen = []

    class FakeEngine:
        @classmethod
        def from_path(cls, path, options):
            seen.append((path, options))
            return cls()
    monkeypatch.setattr(vllm_backend, "require_vllm", lambda: None)
    monkeypatch.setattr(open_mod, "open_vllm", FakeEngine.from_path)
    Judge.from_pretrained(judge_dir, head=head_path, backend="vllm",
                          vllm_options={"data_parallel_size": 2, "tensor_parallel_size": 4})
    Judge.from_pretrained(judge_dir, head=head_path, backend="vllm", dtype="float32",
                          vllm_options=vllm_backend.VllmOptions(dtype="bfloat16", data_parallel_size=3))
    (p1, o1), (_, o2) = seen
    assert p1 == judge_dir and (o1.data_parallel_size, o1.tensor_parallel_size, o1.dtype) == (2, 4, "auto")
    assert (o2.data_parallel_size, o2.dtype) == (3, "float32")
    with pytest.raises(BaerError, match="backend='vllm' only"):
        Judge.from_pretrained(judge_dir, head=head_path, vllm_options={"data_parallel_size": 2})


def test_head_from_published_bank_is_refused(judge_dir, tmp_path):
    from baer_fast.selection.fit import fit_condition
    from tests.fixtures.data import make_signals
    art = fit_condition(make_signals(120), condition="bank")
    with pytest.raises(BaerError, match="cannot run"):
        Judge.from_pretrained(judge_dir, head=art)


def test_a_head_the_judge_cannot_run_is_refused_naming_its_file_before_the_model_loads(tmp_path, monkeypatch, capsys):
    """A head of an imported bank (fit --budget/--cascade on LLMBar's 'CoT', ...) given to Judge, serve or
    score --model: the error names the head's file, and no model is opened for it (an 8B judge loads for
    minutes first)."""
    from baer_fast import artifact
    from baer_fast.cli import main
    from baer_fast.selection.fit import fit_condition
    from tests.fixtures.data import make_signals
    path = str(tmp_path / "imported.json")
    artifact.save(path, fit_condition(make_signals(120), condition="bank"))
    monkeypatch.setattr("baer_fast.runtime.open.open_engine", lambda *a, **k: pytest.fail("the model was opened"))
    for head in (path, artifact.load(path)):
        with pytest.raises(BaerError, match="cannot run") as err:
            Judge.from_pretrained(str(tmp_path / "no-model"), head=head)
        assert (path in str(err.value)) == isinstance(head, str)
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text('{"id": "p1", "question": "q", "response_a": "a", "response_b": "b"}\n')
    assert main(["score", "--model", str(tmp_path / "no-model"), "--head", path, "--input", str(pairs),
                 "--out", str(tmp_path / "s.jsonl")]) == 2
    assert f"{path}: field 'experts'" in capsys.readouterr().err


def test_last_cascade_is_none_for_a_head_without_a_cascade(judge):
    """docs/cost.md: `Judge.last_cascade` holds the cascade's report; reading it on another head raised AttributeError."""
    assert judge.last_cascade is None
    judge.score(["q?"], ["a"], ["b"])
    assert judge.last_cascade is None


def test_batch_invariant_on_vllm_is_refused_before_the_engine_starts(judge_dir, monkeypatch):
    """batch_invariant=True promises each pair the same bits in any batch; vLLM's prefix cache reuses
    KV computed beside other pairs, so it cannot keep it (the CLI refuses --batch-invariant with
    --backend vllm). The Judge took it silently and ran pair by pair, slowly and still not invariant."""
    from baer_fast.api import JudgeOptions
    from baer_fast.artifact import default_artifact
    from baer_fast.runtime import open as open_mod
    from baer_fast.runtime.vllm import backend as vllm_backend

    class FakeVllm:
        kind = "vllm"
    started = []
    monkeypatch.setattr(vllm_backend, "require_vllm", lambda: None)
    monkeypatch.setattr(open_mod, "open_vllm", lambda path, options: started.append(path) or FakeVllm())
    with pytest.raises(BaerError, match="batch_invariant=True needs backend='hf'"):
        Judge.from_pretrained(judge_dir, backend="vllm", batch_invariant=True)
    assert started == []
    with pytest.raises(BaerError, match="batch_invariant=True needs backend='hf'"):
        Judge(FakeVllm(), default_artifact(), options=JudgeOptions(batch_invariant=True))
    assert Judge.from_pretrained(judge_dir, backend="vllm").invariant is False       # None: off on vLLM
