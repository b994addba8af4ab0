"""veRL custom reward functions backed by a `baer-fast serve` (docs/serving.md, "veRL").

veRL loads `custom_reward_function.path` / `.name` and passes `custom_reward_function.reward_kwargs`
as keyword arguments, so `url` (or $BAER_JUDGE_URL) and `api_key_env` (default BAER_API_KEY)
come from the config.
- `compute_score(data_source, solution_str, ground_truth, extra_info)` (reward_manager=naive):
  P(solution better than the reference answer `ground_truth`), in [0, 1].
- `compute_score_batch(data_sources, solution_strs, ground_truths, extra_infos)`
  (reward_manager=batch): rollouts of one question (extra_info[question_key]) judged against
  each other, round robin, mean win (or Bradley-Terry) as in the TRL adapters.
An extra_info's `subset` / `category` reach the judge as the pair's (a head pruned per subset runs
that subset's experts), as a dataset's columns do through the TRL adapters.
"""
from __future__ import annotations

import functools
import os
from typing import Sequence

from baer_fast.errors import InputError


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
        got = "empty" if isinstance(ground_truth, str) or ground_truth is None else type(ground_truth).__name__
        raise InputError(f"compute_score judges the solution against the reference answer in ground_truth, a "
                         f"non-empty string or number (got {got}); without one use compute_score_batch "
                         "(rollouts against each other)", field="ground_truth")
    from baer_fast.integrations.trl import pair_fields

    fields = pair_fields(_columns([extra_info]), [0])
    p = client_for(url, api_key_env).prob_a([_question(extra_info, question_key)], [solution_str], [ground_truth],
                                            **fields)
    return float(p[0])


def compute_score_batch(data_sources: Sequence, solution_strs: Sequence[str], ground_truths: Sequence,
                        extra_infos: Sequence, *, url: str | None = None, api_key_env: str = "BAER_API_KEY",
                        question_key: str = "question", method: str = "mean_win", **_) -> list[float]:
    from baer_fast.integrations.trl import (check_method, group_rewards, pair_fields, pair_texts, prompt_groups,
                                            round_robin)

    check_method(method)
    questions = [_question(e, question_key) for e in extra_infos]
    gs = prompt_groups(questions)
    texts = [str(s) for s in solution_strs]
    todo = round_robin(gs, texts)
    fields = pair_fields(_columns(extra_infos), [i for _, i, _ in todo])
    p = client_for(url, api_key_env).prob_a(*pair_texts(questions, texts, todo), **fields).tolist() if todo else []
    return group_rewards(len(texts), gs, todo, p, method=method)
