"""BAER as TRL reward functions (and a TRL<=1.0-style pairwise judge).

TRL >= 1.1 has no judge classes: a judge enters training as a reward function.
- OnlineDPO (`trl.experimental.online_dpo`) calls `f(prompts=2*P, completions=[first..., second...])`
  and prefers completion i over i+B when reward_i >= reward_{i+B}. `online_dpo_reward` judges
  (i, i+B) once and returns [s_i..., -s_i...]: swapping the halves negates every reward.
- GRPO calls `f(prompts, completions, completion_ids, **columns)` with each prompt's
  `num_generations` completions consecutive. `grpo_reward` judges every pair inside a group
  (round robin, both orders by construction) and returns a mean-win or Bradley-Terry reward.
Prompts and completions may be plain strings or conversational message lists.
Nothing here imports trl itself: the functions only follow its calling convention.
"""
from __future__ import annotations

import math
from typing import Sequence

from baer_fast.errors import InputError


def as_text(x) -> str:
    """A plain string, or the text of a conversation (list of {'role', 'content'} messages)."""
    if isinstance(x, str):
        return x
    if isinstance(x, dict):
        return str(x.get("content", ""))
    if isinstance(x, (list, tuple)):
        if len(x) == 1:
            return as_text(x[0])
        return "\n\n".join(f"{m.get('role', 'user')}: {m.get('content', '')}" if isinstance(m, dict)
                             else str(m) for m in x)
    return str(x)


def online_dpo_reward(judge):
    """Reward function for OnlineDPOTrainer(reward_funcs=[...])."""
    def baer_online_dpo(prompts: Sequence, completions: Sequence, **_) -> list[float]:
        n = len(completions)
        if n % 2 or len(prompts) != n:
            raise InputError(f"OnlineDPO passes 2*B prompts and completions; got {len(prompts)} and {n}")
        half = n // 2
        qs = [as_text(p) for p in prompts[:half]]
        s = judge.score(qs, [as_text(c) for c in completions[:half]],
                        [as_text(c) for c in completions[half:]]).tolist()
        return [float(v) for v in s] + [float(-v) for v in s]
    return baer_online_dpo


def groups(prompts: Sequence, num_generations: int) -> list[range]:
    """Consecutive runs of equal prompts cut into groups of num_generations; error if split."""
    keys = [as_text(p) for p in prompts]
    out, start = [], 0
    for i in range(1, len(keys) + 1):
        if i == len(keys) or keys[i] != keys[start]:
            run = i - start
            if run % num_generations:
                raise InputError(f"GRPO group of prompt #{start} arrived with {run} completions, not a multiple "
                                 f"of num_generations={num_generations}: the group was split across "
                                 "processes; make the per-device batch a multiple of num_generations")
            out += [range(s, s + num_generations) for s in range(start, i, num_generations)]
            start = i
    return out


def bradley_terry(wins, n: int, iters: int = 200) -> list[float]:
    """Log-strengths from soft win counts wins[i][j] (MM algorithm, mean-centred)."""
    p = [1.0] * n
    for _ in range(iters):
        new = []
        for i in range(n):
            w = sum(wins[i][j] for j in range(n) if j != i)
            d = sum((wins[i][j] + wins[j][i]) / (p[i] + p[j]) for j in range(n) if j != i)
            new.append(max(w, 1e-9) / d if d > 0 else p[i])
        g = math.exp(sum(math.log(v) for v in new) / n)
        p = [v / g for v in new]
    return [math.log(v) for v in p]


def grpo_reward(judge, *, num_generations: int, method: str = "mean_win"):
    """Reward function for GRPOTrainer: one reward per completion from its group's pairwise judgments."""
    if method not in ("mean_win", "bradley_terry"):
        raise ValueError("method must be 'mean_win' or 'bradley_terry'")

    def baer_grpo(prompts: Sequence, completions: Sequence, completion_ids=None, **_) -> list[float]:
        if len(prompts) != len(completions):
            raise InputError(f"{len(prompts)} prompts for {len(completions)} completions")
        texts = [as_text(c) for c in completions]
        todo = [(g, i, j) for g in groups(prompts, num_generations) for i in g for j in g if i < j]
        if not todo:
            return [0.0] * len(completions)
        p = judge.prob_a([as_text(prompts[i]) for _, i, _ in todo], [texts[i] for _, i, _ in todo],
                         [texts[j] for _, _, j in todo]).tolist()
        rewards = [0.0] * len(completions)
        for g in groups(prompts, num_generations):
            idx = {k: n for n, k in enumerate(g)}
            wins = [[0.0] * len(g) for _ in g]
            for (gg, i, j), pij in zip(todo, p):
                if gg == g:
                    wins[idx[i]][idx[j]], wins[idx[j]][idx[i]] = pij, 1.0 - pij
            vals = (bradley_terry(wins, len(g)) if method == "bradley_terry"
                    else [sum(row) / (len(g) - 1) for row in wins])
            for k, v in zip(g, vals):
                rewards[k] = float(v)
        return rewards
    return baer_grpo


class BAERPairwiseJudge:
    """The shape of TRL<=1.0's BasePairwiseJudge: judge(prompts, completions) -> list[int].

    completions[i] is a pair [c0, c1]; the result is the index of the better one. BAER is
    order-symmetric by construction, so `shuffle_order` changes nothing and is accepted for
    compatibility.
    """

    def __init__(self, baer_judge):
        self.baer = baer_judge

    def judge(self, prompts: list, completions: list, shuffle_order: bool = True) -> list[int]:
        if len(prompts) != len(completions) or any(len(c) != 2 for c in completions):
            raise InputError("completions must be a list of [c0, c1] pairs, one per prompt")
        s = self.judge_model_scores(prompts, completions)
        return [0 if v >= 0 else 1 for v in s]

    def judge_model_scores(self, prompts, completions) -> list[float]:
        return self.baer.score([as_text(p) for p in prompts], [as_text(c[0]) for c in completions],
                                [as_text(c[1]) for c in completions]).tolist()
