"""Judge.from_pretrained(model) with no head: the label-free default head (heads/default.py)."""
import numpy as np
import pytest
import torch

from baer_fast import artifact
from baer_fast.api import Judge
from baer_fast.heads.default import DEFAULT_EXPERTS, DefaultHead
from baer_fast.integrations.trl import grpo_reward, online_dpo_reward

Q = ["what is the sum of a list?", "is the code correct?", "explain why", "count the words"]
A = ["the sum is 10", "yes the python code returns the sum", "", "three"]
B = ["it returns a list", "no", "because the answer is correct", "3 words"]


def test_default_head_scores_antisymmetrically_without_a_head_file(default_judge):
    s, swapped = default_judge.score(Q, A, B), default_judge.score(Q, B, A)
    assert s.shape == (4,) and s.dtype == torch.float64 and torch.all(torch.isfinite(s))
    # the runs mirror bit for bit (bank/canonical.py); the float64 head negates them up to its own rounding
    from tests.fixtures.tolerances import HEAD_OPS, fp64_tol
    assert torch.max(torch.abs(s + swapped)) <= fp64_tol(HEAD_OPS, 1 + float(s.abs().max()))
    assert default_judge.experts == list(DEFAULT_EXPERTS)
    assert {r["head"] for r in default_judge.results(Q, A, B)} == {"default"}


def test_default_head_is_the_mean_of_zt_of_its_experts(default_judge):
    from baer_fast.features.evidence import evidence, runs_tensor
    records = default_judge.signals(Q, A, B)
    _, _, _, zt = evidence(runs_tensor(records, list(DEFAULT_EXPERTS)))
    assert np.allclose(default_judge.score(Q, A, B).numpy(), zt.mean(axis=1), atol=0, rtol=1e-12)


def test_default_artifact_is_a_valid_head_artifact(tmp_path):
    art = artifact.default_artifact()
    path = str(tmp_path / "default.json")
    artifact.save(path, art)
    loaded = artifact.load(path)                              # checksum and schema validated
    assert loaded["head"] == "default" and loaded["experts"] == list(DEFAULT_EXPERTS)
    head = artifact.deployed_head(loaded)
    assert isinstance(head, DefaultHead) and DefaultHead.from_json(head.to_json()) == head


def test_head_argument_still_overrides(judge_dir, head_path):
    fitted = Judge.from_pretrained(judge_dir, head=head_path, kernels="torch")
    assert fitted.art["head"] != "default" and fitted.results(Q[:1], A[:1], B[:1])[0]["head"] == fitted.art["head"]


def test_trl_adapters_run_with_the_default_head(default_judge):
    r = online_dpo_reward(default_judge)(prompts=2 * Q[:2], completions=A[:2] + B[:2])
    assert r[:2] == [-v for v in r[2:]]
    prompts, comps = [Q[0]] * 3 + [Q[1]] * 3, A[:3] + B[:3]
    for method in ("mean_win", "bradley_terry"):
        rewards = grpo_reward(default_judge, num_generations=3, method=method)(prompts, comps)
        assert len(rewards) == 6 and all(np.isfinite(rewards))
        if method == "mean_win":
            assert sum(rewards[:3]) == pytest.approx(1.5) and sum(rewards[3:]) == pytest.approx(1.5)
