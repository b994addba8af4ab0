"""veRL custom reward functions backed by a `baer-fast serve` (docs/serving.md, "veRL").

veRL loads `custom_reward_function.path` / `.name` and passes `custom_reward_function.reward_kwargs`
as keyword arguments, so `url` (or $BAER_JUDGE_URL) and `api_key_env` (default BAER_API_KEY)
come from the config.
- `compute_score(data_source, solution_str, ground_truth, extra_info)` (reward_manager=naive):
  P(solution better than the reference answer `ground_truth`), in [0, 1].
- `compute_score_batch(data_sources, solution_strs, ground_truths, extra_infos)`
  (reward_manager=batch): rollouts of one question (extra_info[question_key]) judged against
  each other, round robin, mean win (or Bradley-Terry) as in the TRL adapters; a call of lone
  rollouts (rollout.n or val_kwargs.n of 1) is an error unless `single_rollout="neutral"`.
An extra_info's `subset` / `category` reach the judge as the pair's (a head pruned per subset runs
that subset's experts), as a dataset's columns do through the TRL adapters.
"""
from __future__ import annotations

import functools
import logging
import os
from typing import Sequence

from baer_fast.errors import InputError

log = logging.getLogger("baer_fast")
_warned_lone: list = []          # one warning per process for calls of lone rollouts judged neutral


@functools.lru_cache(maxsize=8)
def _client(url: str, key: str | None):
    from baer_fast.client import JudgeClient
    return JudgeClient(url, api_key=key)


def client_for(url: str | None = None, api_key_env: str = "BAER_API_KEY"):
    url = url or os.environ.get("BAER_JUDGE_URL")
    if not url:
        raise InputError("no judge server: pass reward_kwargs.url or set BAER_JUDGE_URL", field="url")
    return _client(url, os.environ.get(api_key_env) or None)


def _question(extra_info, key: str) -> str:
    if isinstance(extra_info, dict) and isinstance(extra_info.get(key), str):
        return extra_info[key]
    raise InputError(f"extra_info has no string {key!r}: put each prompt's question text there "
                     "(veRL's data preprocessing writes extra_info)", field=f"extra_info.{key}")


def _columns(extra_infos: Sequence) -> dict:
    """The extra_infos' `subset` / `category` as columns (trl.pair_fields), where any of them has one."""
    infos = [e if isinstance(e, dict) else {} for e in extra_infos]
    return {k: [e.get(k) for e in infos] for k in ("subset", "category") if any(e.get(k) is not None for e in infos)}


def compute_score(data_source, solution_str: str, ground_truth, extra_info=None, *, url: str | None = None,
                  api_key_env: str = "BAER_API_KEY", question_key: str = "question", **_) -> float:
    if isinstance(ground_truth, (int, float)) and not isinstance(ground_truth, bool):
        ground_truth = str(ground_truth)            # math datasets keep numeric answers
    if not isinstance(ground_truth, str) or not ground_truth.strip():
        got = ("None" if ground_truth is None else "an empty string" if isinstance(ground_truth, str)
               else type(ground_truth).__name__)
        raise InputError(f"compute_score judges the solution against the reference answer in ground_truth, a "
                         f"non-empty string or number (got {got}); without one use compute_score_batch "
                         "(rollouts against each other)", field="ground_truth")
    from baer_fast.integrations.trl import pair_fields

    fields = pair_fields(_columns([extra_info]), [0])
    p = client_for(url, api_key_env).prob_a([_question(extra_info, question_key)], [solution_str], [ground_truth],
                                            **fields)
    return float(p[0])


def lone_rollouts(n: int, single_rollout: str, neutral: float) -> None:
    """Every question of a call has one rollout: nothing to compare it with, so the only reward is a
    constant. An error by default (veRL validates before training, so a wrong n stops the run at step 0,
    before it trains on a constant); `single_rollout="neutral"` accepts the neutral reward, warned once."""
    if single_rollout == "error":
        raise InputError(f"every one of the {n} questions in this call has a single rollout; a pairwise judge "
                         "compares a question's rollouts with each other, so a lone one could only get a constant "
                         "reward. Training: set actor_rollout_ref.rollout.n to 2 or more. Validation (veRL's "
                         "default val_kwargs.n=1): set actor_rollout_ref.rollout.val_kwargs.n>=2 with "
                         "val_kwargs.do_sample=True, or trainer.test_freq=-1 trainer.val_before_train=False, or "
                         "accept a constant validation reward with "
                         "+custom_reward_function.reward_kwargs.single_rollout=neutral")
    if not _warned_lone:
        _warned_lone.append(True)
        log.warning("compute_score_batch: every question of a call has a single rollout; each gets the neutral "
                    "reward %s (single_rollout='neutral'): if this is training, set actor_rollout_ref.rollout.n "
                    "to 2 or more", neutral)


def compute_score_batch(data_sources: Sequence, solution_strs: Sequence[str], ground_truths: Sequence,
                        extra_infos: Sequence, *, url: str | None = None, api_key_env: str = "BAER_API_KEY",
                        question_key: str = "question", method: str = "mean_win", single_rollout: str = "error",
                        **_) -> list[float]:
    from baer_fast.integrations.trl import (NAMED, NEUTRAL, check_method, group_rewards, named_by_caller,
                                            pair_fields, pair_texts, prompt_groups, round_robin)

    check_method(method)
    if single_rollout not in ("error", "neutral"):
        raise InputError(f"single_rollout must be 'error' or 'neutral', got {single_rollout!r}",
                         field="reward_kwargs.single_rollout")
    questions = [_question(e, question_key) for e in extra_infos]
    gs = prompt_groups(questions)
    if gs and all(len(g) == 1 for g in gs):
        lone_rollouts(len(gs), single_rollout, NEUTRAL[method])
    texts = [str(s) for s in solution_strs]
    todo = round_robin(gs, texts)
    fields = pair_fields(_columns(extra_infos), [i for _, i, _ in todo])
    try:
        p = client_for(url, api_key_env).prob_a(*pair_texts(questions, texts, todo), **fields).tolist() if todo else []
    except NAMED as e:                    # an over-long pair (serve --no-truncate), named by its rollouts
        raise named_by_caller(e, todo, "rollouts") from None
    return group_rewards(len(texts), gs, todo, p, method=method)
