"""The reward functions drive real TRL trainers (offline, CPU) with the BAER judge."""
import pytest

from baer_fast.errors import InputError
from baer_fast.integrations.trl import BAERPairwiseJudge, grpo_reward, groups, online_dpo_reward

trl = pytest.importorskip("trl", reason="TRL adapters need the [trl] extra")

PROMPTS = ["what is the sum of a list?", "is the code correct?", "explain why", "count the words"]


@pytest.fixture(scope="module")
def policy_dir(tmp_path_factory):
    from tests.fixtures.tiny_models import build_model_dir
    return build_model_dir(str(tmp_path_factory.mktemp("policy")), arch="llama", seed=3, max_pos=256)


def _dataset(conversational=False, **columns):
    from datasets import Dataset
    if conversational:
        return Dataset.from_dict({"prompt": [[{"role": "user", "content": p}] for p in PROMPTS], **columns})
    return Dataset.from_dict({"prompt": PROMPTS, **columns})


def test_online_dpo_rewards_negate_when_halves_swap(judge):
    f = online_dpo_reward(judge)
    first, second = ["the sum is 3", "no"], ["a list", "yes it is correct"]
    r = f(prompts=2 * PROMPTS[:2], completions=first + second)
    r_swapped = f(prompts=2 * PROMPTS[:2], completions=second + first)
    assert len(r) == 4
    assert r[:2] == [-v for v in r[2:]]
    assert r_swapped == [-v for v in r]          # the signals mirror bit for bit, and so do the features


def test_online_dpo_trainer_runs_with_baer_rewards(judge, policy_dir, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl.experimental.online_dpo import OnlineDPOConfig, OnlineDPOTrainer

    calls, seen = [], []
    reward = online_dpo_reward(judge)

    def counted(**kw):
        out = reward(**kw)
        calls.append(len(out))
        seen.append((kw["prompts"], kw["completions"], out))
        return out

    cfg = OnlineDPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=2, max_steps=2,
                          max_new_tokens=6, logging_steps=1, report_to=[], use_cpu=True, save_strategy="no",
                          bf16=False, dataloader_num_workers=0, seed=0)
    trainer = OnlineDPOTrainer(model=AutoModelForCausalLM.from_pretrained(policy_dir), reward_funcs=[counted],
                               args=cfg, train_dataset=_dataset(),
                               processing_class=AutoTokenizer.from_pretrained(policy_dir))
    trainer.train()
    assert calls == [4, 4]                       # 2 steps x (2 prompts x 2 completions)
    import torch
    from tests.fixtures.tolerances import HEAD_OPS, fp32_tol, fp64_tol
    for prompts, completions, r in seen:         # completion k against k + B, judged as such: [s, -s]
        s = judge.score(prompts[:2], completions[:2], completions[2:]).tolist()
        assert all(abs(x - y) <= fp64_tol(HEAD_OPS, 1 + abs(y)) for x, y in zip(r, s + [-v for v in s]))
        assert reward(prompts=prompts, completions=completions[2:] + completions[:2]) == [-v for v in r]
    logged = [h for h in trainer.state.log_history if "objective/scores_margin" in h]
    assert len(logged) == len(seen)              # the trainer chose the higher reward: margins 2|s|
    for h, (_, _, r) in zip(logged, seen):
        assert abs(h["objective/scores_margin"] - float(torch.tensor(r[:2]).abs().mean() * 2)) <= fp32_tol(64, 1 + max(r))


@pytest.mark.parametrize("method", ["mean_win", "bradley_terry"])
def test_grpo_trainer_runs_with_baer_rewards(judge, policy_dir, tmp_path, method):
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    seen, calls = [], []
    reward = grpo_reward(judge, num_generations=2, method=method)

    def counted(prompts, completions, **kw):
        out = reward(prompts, completions, **kw)
        seen.append(out)
        calls.append((prompts, completions, kw))
        assert kw["subset"] and set(kw["subset"]) <= {"chat", "math"}     # TRL hands the column over
        return out

    cfg = GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=2, num_generations=2, max_steps=2,
                     max_completion_length=6, logging_steps=1, report_to=[], use_cpu=True, save_strategy="no",
                     bf16=False, dataloader_num_workers=0, seed=0)
    trainer = GRPOTrainer(model=AutoModelForCausalLM.from_pretrained(policy_dir), reward_funcs=[counted],
                          args=cfg, train_dataset=_dataset(conversational=True, subset=["chat", "math"] * 2),
                          processing_class=AutoTokenizer.from_pretrained(policy_dir))
    trainer.train()
    assert seen and all(len(r) % 2 == 0 for r in seen)
    from tests.fixtures.tolerances import HEAD_OPS, fp32_tol, fp64_tol
    if method == "mean_win":                     # a pair's two mean-win rewards sum to 1
        assert all(abs(r[i] + r[i + 1] - 1.0) <= fp64_tol(HEAD_OPS) for r in seen for i in range(0, len(r), 2))
    _rewards_are_the_judges(judge, calls, seen, reward, method)
    import torch
    from trl.trainer.utils import nanstd
    logged = [h for h in trainer.state.log_history if "rewards/counted/std" in h]
    assert len(logged) == len(seen)              # one generation per step, one log per step
    for h, r in zip(logged, seen):               # what TRL logs is the judge's rewards (its float32 copy)
        r32 = torch.tensor(r, dtype=torch.float32)
        assert abs(h["rewards/counted/std"] - float(nanstd(r32))) <= fp32_tol(64)
        assert abs(h["rewards/counted/mean"] - float(r32.mean())) <= fp32_tol(64)


def _rewards_are_the_judges(judge, calls, seen, reward, method):
    """Each GRPO call's rewards, recomputed from judge.prob_a of its pairs; the group's completions in
    the other order get the same rewards in that order, bit for bit."""
    from baer_fast.integrations.trl import as_question, as_text
    from tests.fixtures.tolerances import HEAD_OPS, fp64_tol
    for (prompts, completions, kw), r in zip(calls, seen):
        for i in range(0, len(r), 2):
            q, a, b = as_question(prompts[i]), as_text(completions[i]), as_text(completions[i + 1])
            p = float(judge.prob_a([q], [a], [b], subsets=[kw["subset"][i]])[0])      # the column selects blocks
            if method == "mean_win":             # a group of two: each completion's P(it beats the other)
                assert abs(r[i] - p) <= fp64_tol(HEAD_OPS) and abs(r[i + 1] - (1 - p)) <= fp64_tol(HEAD_OPS)
            else:                                # Bradley-Terry of two: the log-odds split evenly, centred
                assert (r[i] > r[i + 1]) == (p > 0.5) or abs(p - 0.5) <= fp64_tol(HEAD_OPS)
        order = [j ^ 1 for j in range(len(r))]
        swapped = reward([prompts[j] for j in order], [completions[j] for j in order],
                         **{k: ([v[j] for j in order] if isinstance(v, list) else v) for k, v in kw.items()})
        assert swapped == [r[j] for j in order]


class Recording:
    """A judge that records the keywords it gets and scores len(a) - len(b)."""
    def __init__(self):
        self.fields = []

    def score(self, qs, a, b, **fields):
        import torch
        self.fields.append(fields)
        return torch.tensor([float(len(x) - len(y)) for x, y in zip(a, b)], dtype=torch.float64)

    def prob_a(self, qs, a, b, **fields):
        from baer_fast.api import torch_sigmoid
        return torch_sigmoid(self.score(qs, a, b, **fields))


def test_subset_and_category_columns_reach_the_judge_per_pair():
    rec = Recording()
    grpo = grpo_reward(rec, num_generations=2)
    grpo(["p", "p", "q", "q"], ["a", "bb", "c", "dd"], subset=["x", "x", "y", "y"], category=[1, 1, "", ""],
         other=[0] * 4)
    online_dpo_reward(rec)(prompts=["p", "q", "p", "q"], completions=["a", "b", "cc", "d"], subset=["x", "y"] * 2)
    grpo(["p", "p"], ["a", "bb"])                                         # no such columns: no keywords
    assert rec.fields == [{"subsets": ["x", "y"], "categories": ["1", None]}, {"subsets": ["x", "y"]}, {}]


def test_grpo_split_group_is_a_clear_error():
    assert [list(g) for g in groups(["p", "p", "q", "q"], 2)] == [[0, 1], [2, 3]]
    with pytest.raises(InputError, match="num_generations_eval"):
        groups(["p", "p", "p", "q", "q"], 2)
    with pytest.raises(ValueError, match="at least 2"):
        grpo_reward(object(), num_generations=0)


def test_a_conversational_prompt_is_judged_as_the_conversation(judge):
    """The reward functions flattened a conversation into 'user: ...' text, so the same pair scored
    otherwise than through Judge; a system message is kept as the first user turn's opening."""
    from baer_fast.integrations.trl import as_question
    conv = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"},
            {"role": "user", "content": PROMPTS[0]}]
    want = judge.score([conv], ["the sum is 3"], ["no"]).tolist()
    got = online_dpo_reward(judge)(prompts=[conv] * 2, completions=[[{"role": "assistant", "content": "the sum is 3"}],
                                                                    [{"role": "assistant", "content": "no"}]])
    assert got[:1] == want
    system = [{"role": "system", "content": "Be brief."}, *conv]
    assert as_question(system)[0] == {"role": "user", "content": "System: Be brief.\n\nHi"}
    assert as_question([{"role": "user", "content": "one turn"}]) == "one turn"
    assert as_question([{"role": "user", "content": "x"}, {"role": "tool", "content": "y"}]) == "user: x\n\ntool: y"


def test_pairwise_judge_shape_for_trl_1_0_code(judge):
    pj = BAERPairwiseJudge(judge)
    comps = [["the sum is 3", "no"], ["yes it is correct", "a list"]]
    picks = pj.judge(PROMPTS[:2], comps)
    flipped = pj.judge(PROMPTS[:2], [c[::-1] for c in comps])
    assert all(p in (0, 1) for p in picks)
    assert [1 - p for p in picks] == flipped or any(
        s == 0 for s in pj.judge_model_scores(PROMPTS[:2], comps))


class _Stand:
    """A stand-in judge: P(a beats b) = sigmoid(h(a) - h(b)), exactly antisymmetric in its score."""
    @staticmethod
    def prob_a(questions, a, b, **_):
        import hashlib
        import math

        import torch

        def h(t):
            return int(hashlib.sha256(t.encode()).hexdigest()[:8], 16) / 2**32 * 6
        return torch.tensor([1 / (1 + math.exp(-(h(x) - h(y)))) for x, y in zip(a, b)], dtype=torch.float64)


@pytest.mark.parametrize("method", ["mean_win", "bradley_terry"])
def test_group_rewards_permute_exactly_and_twins_get_equal_rewards(method):
    """Rewards drifted by 1e-16 under a shuffle of the group, and a duplicated completion got another
    reward than its twin: pairs were oriented by position and summed in position order."""
    import random
    comps = ["alpha", "beta is longer", "gamma", "beta is longer", "delta d", "eps"]
    f = grpo_reward(_Stand(), num_generations=6, method=method)
    base = f(prompts=["q"] * 6, completions=comps)
    assert base[1] == base[3]
    rng = random.Random(0)
    for _ in range(5):
        perm = list(range(6))
        rng.shuffle(perm)
        got = f(prompts=["q"] * 6, completions=[comps[i] for i in perm])
        assert got == [base[i] for i in perm]


def test_grpo_evaluation_with_its_own_num_generations_runs(policy_dir, tmp_path):
    """TRL 1.16 evaluates with the same reward function: grpo_reward took one num_generations, so the
    first evaluation (num_generations_eval=2 < 4) was an error, or training groups were judged in pairs."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    seen = []
    reward = grpo_reward(_Stand(), num_generations=4, num_generations_eval=2)

    def counted(prompts, completions, **kw):
        seen.append((list(prompts), list(completions), reward(prompts, completions, **kw)))
        return seen[-1][2]

    cfg = GRPOConfig(output_dir=str(tmp_path), num_generations=4, num_generations_eval=2, max_steps=2,
                     per_device_train_batch_size=4, per_device_eval_batch_size=4, eval_strategy="steps", eval_steps=1,
                     max_completion_length=6, report_to=[], use_cpu=True, save_strategy="no", bf16=False,
                     dataloader_num_workers=0, seed=0)
    from datasets import Dataset
    trainer = GRPOTrainer(model=AutoModelForCausalLM.from_pretrained(policy_dir), reward_funcs=[counted], args=cfg,
                          train_dataset=_dataset(), eval_dataset=Dataset.from_dict({"prompt": ["eval a", "eval b"]}),
                          processing_class=AutoTokenizer.from_pretrained(policy_dir))
    trainer.train()
    evals = [s for s in seen if s[0][0].startswith("eval")]
    assert evals and len(evals) < len(seen)
    for prompts, comps, out in seen:
        size = 2 if prompts[0].startswith("eval") else 4
        assert out == grpo_reward(_Stand(), num_generations=size)(prompts, comps)


def test_grpo_group_size_follows_the_trainer_mode_then_the_runs():
    """The calling trainer's mode picks the size even where the runs fit both; without a trainer the
    runs decide (the larger where both fit); evaluation groups of one get the neutral reward."""
    from types import SimpleNamespace

    class Trainer:                       # log_metric is a bound method of the trainer, as in trl 1.16
        def __init__(self, training):
            self.model = SimpleNamespace(training=training)

        def _log_metric(self, name, value):
            pass

    prompts, comps = ["q"] * 4, ["alpha", "beta is longer", "gamma", "delta d"]
    f = grpo_reward(_Stand(), num_generations=4, num_generations_eval=2)
    four, two = (grpo_reward(_Stand(), num_generations=n)(prompts, comps) for n in (4, 2))
    assert four != two
    assert f(prompts, comps, log_metric=Trainer(True)._log_metric) == four
    assert f(prompts, comps, log_metric=Trainer(False)._log_metric) == two
    assert f(prompts, comps, log_metric=lambda name, value: None) == four      # no trainer behind it: runs decide
    assert f(prompts, comps) == four
    assert f(["q", "q", "r", "r"], comps) == grpo_reward(_Stand(), num_generations=2)(["q", "q", "r", "r"], comps)
    rec = Recording()
    lone = grpo_reward(rec, num_generations=2, num_generations_eval=1)
    assert lone(["p", "q"], ["a", "bb"], log_metric=Trainer(False)._log_metric) == [0.5, 0.5]
    assert rec.fields == []                                                    # nothing to judge
    with pytest.raises(ValueError, match="num_generations_eval must be an integer of at least 1"):
        grpo_reward(rec, num_generations=2, num_generations_eval=0)


def test_remote_online_dpo_reward_is_not_offered_async():
    """trl 1.16's OnlineDPOTrainer calls reward functions synchronously: the async one handed it a
    coroutine, and the step failed with a bare TypeError."""
    import inspect

    from baer_fast.integrations.trl import remote_reward
    with pytest.raises(ValueError, match="synchronously.*without asynchronous=True"):
        remote_reward("http://127.0.0.1:9", trainer="online_dpo", asynchronous=True)
    assert not inspect.iscoroutinefunction(remote_reward("http://127.0.0.1:9", trainer="online_dpo"))


def test_pairwise_judge_soft_scores_for_win_rate_callback():
    """TRL<=1.0's WinRateCallback(use_soft_judge=True) calls judge(prompts, pairs, shuffle_order,
    return_scores=True) for P(first better): BAERPairwiseJudge took no return_scores (TypeError)."""
    import math
    pj = BAERPairwiseJudge(Recording())                  # P(a beats b) = sigmoid(len(a) - len(b))
    pairs = list(zip(["the sum is 3", "yes"], ["a list", "no, it is not"]))      # the callback passes tuples
    soft = pj.judge(PROMPTS[:2], pairs, True, return_scores=True)
    assert soft == pytest.approx([1 / (1 + math.exp(-6)), 1 / (1 + math.exp(10))], rel=1e-12)
    assert all(type(p) is float for p in soft)
    assert [0 if p > 0.5 else 1 for p in soft] == pj.judge(PROMPTS[:2], pairs, True) == [0, 1]
    flipped = pj.judge(PROMPTS[:2], [p[::-1] for p in pairs], False, return_scores=True)
    assert [a + b for a, b in zip(soft, flipped)] == pytest.approx([1.0, 1.0], rel=1e-12)


def test_grpo_names_an_over_long_completion_by_its_index(default_judge):
    """A Judge with truncate=False inside grpo_reward: the error names the trainer's completions,
    not the round-robin pair the reward function made of them."""
    from baer_fast.api import Judge, JudgeOptions
    from baer_fast.errors import PromptTooLong
    strict = Judge(default_judge.engine, default_judge.art, options=JudgeOptions(truncate=False))
    reward = grpo_reward(strict, num_generations=3)
    with pytest.raises(PromptTooLong) as err:
        reward(["p"] * 6, ["a", "b", "c", "x", "y " * 3000, "z"])
    assert str(err.value).startswith("pair of completions 3 and 4 (0-based): ")
