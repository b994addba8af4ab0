"""BAER as TRL reward functions (and a TRL<=1.0-style pairwise judge).

TRL >= 1.1 has no judge classes: a judge enters training as a reward function.
- OnlineDPO (`trl.experimental.online_dpo`) calls `f(prompts=2*P, completions=[first..., second...])`
  and prefers completion i over i+B when reward_i >= reward_{i+B}. `online_dpo_reward` judges
  (i, i+B) once and returns [s_i..., -s_i...]: swapping the halves negates every reward.
- GRPO calls `f(prompts, completions, completion_ids, **columns)` with each prompt's `num_generations`
  (evaluating: `num_generations_eval`) completions consecutive. `grpo_reward` judges every pair in a group
  (round robin, both orders by construction) and returns a mean-win or Bradley-Terry reward.
Prompts and completions may be plain strings or conversational message lists; a conversational
prompt reaches the judge as a conversation (`as_question`), a completion as its text. `remote_reward`
gives the same functions judged by a `baer-fast serve` (GRPO's also async); the server's /get_reward
and the veRL adapter reuse the round robin and the group rewards below.
Nothing here imports trl itself: the functions only follow its calling convention.
"""
from __future__ import annotations

import logging
import math
from typing import Sequence

from baer_fast.client import JudgeServerError
from baer_fast.errors import InputError, PromptTooLong

log = logging.getLogger("baer_fast")
NAMED = (PromptTooLong, JudgeServerError)     # errors that may name a pair of the judge's call


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


def as_question(x):
    """A prompt as Judge takes it: a string, or a conversation (alternating user/assistant messages
    ending with the user's) that the judge reads through its chat template, as a pairs file's
    multi-turn question (docs/datasets.md). A system message is kept as the first user turn's opening
    ("System: ..."), since the judge's own protocol prompt holds the system slot; a lone user message
    is its text. A message list that is no such conversation (a tool turn, an assistant last) is
    judged as its text with roles (`as_text`)."""
    from baer_fast.io.records import as_conversation

    if not isinstance(x, (list, tuple)) or not x or not all(isinstance(m, dict) for m in x):
        return as_text(x)
    msgs = [{"role": m.get("role", "user"), "content": str(m.get("content", ""))} for m in x]
    system = "\n\n".join(m["content"] for m in msgs if m["role"] == "system")
    turns = [m for m in msgs if m["role"] != "system"]
    if system and turns and turns[0]["role"] == "user":
        turns[0] = {"role": "user", "content": f"System: {system}\n\n{turns[0]['content']}"}
    try:
        as_conversation(turns)
    except ValueError:
        return as_text(x)
    return turns[0]["content"] if len(turns) == 1 else turns


def dpo_halves(prompts: Sequence, completions: Sequence) -> tuple[list[str], list[str], list[str]]:
    """OnlineDPO's 2*B prompts and completions -> (questions, firsts, seconds), B each."""
    n = len(completions)
    if n % 2 or len(prompts) != n:
        raise InputError(f"OnlineDPO passes 2*B prompts and completions; got {len(prompts)} and {n}")
    half = n // 2
    return ([as_question(p) for p in prompts[:half]], [as_text(c) for c in completions[:half]],
            [as_text(c) for c in completions[half:]])


def dpo_rewards(scores) -> list[float]:
    """Scores of (first_i, second_i) -> [s_i..., -s_i...]: swapping the halves negates every reward."""
    return [float(v) for v in scores] + [float(-v) for v in scores]


def pair_fields(columns: dict, rows: Sequence[int]) -> dict:
    """Judge keywords from the dataset's `subset` / `category` columns (TRL passes every column as a
    keyword), taken at each pair's prompt row; a head pruned per subset then runs each pair's own
    experts. Values become strings; None and "" mean none."""
    out = {}
    for column, key in (("subset", "subsets"), ("category", "categories")):
        values = columns.get(column)
        if values is not None:
            out[key] = [None if _blank(values[i]) else str(values[i]) for i in rows]
    return out


def _blank(v) -> bool:
    return v is None or (isinstance(v, str) and not v)


def online_dpo_reward(judge):
    """Reward function for OnlineDPOTrainer(reward_funcs=[...])."""
    def baer_online_dpo(prompts: Sequence, completions: Sequence, **columns) -> list[float]:
        half = len(completions) // 2
        fields = pair_fields(columns, range(half))
        try:
            return dpo_rewards(judge.score(*dpo_halves(prompts, completions), **fields).tolist())
        except NAMED as e:                        # pair k of the call is completions k and k + B
            raise named_by_caller(e, [(0, k, k + half) for k in range(half)]) from None
    return baer_online_dpo


_warned_larger: list = []        # one warning per process for runs longer than num_generations


def runs(prompts: Sequence) -> list[tuple[int, int]]:
    """(start, length) of each run of consecutive equal prompts."""
    keys = [as_text(p) for p in prompts]
    out, start = [], 0
    for i in range(1, len(keys) + 1):
        if i == len(keys) or keys[i] != keys[start]:
            out.append((start, i - start))
            start = i
    return out


def groups(prompts: Sequence, num_generations: int) -> list[range]:
    """Consecutive runs of equal prompts cut into groups of num_generations; error if split."""
    out = []
    for start, run in runs(prompts):
        if run % num_generations:
            raise InputError(f"GRPO passed {run} consecutive completions of prompt #{start}, not a multiple of "
                             f"num_generations={num_generations}: give grpo_reward the trainer's own numbers "
                             "(num_generations=GRPOConfig.num_generations, and num_generations_eval=GRPOConfig."
                             "num_generations_eval where it differs), and keep a group on one process (a per-device "
                             "batch that is a multiple of them)")
        if run > num_generations and not _warned_larger:
            _warned_larger.append(True)
            log.warning("GRPO passed %d consecutive completions of prompt #%d, judged as %d groups of "
                        "num_generations=%d; if the trainer's num_generations is %d, pass that, so that each "
                        "completion is compared with all of them", run, start, run // num_generations,
                        num_generations, run)
        out += [range(s, s + num_generations) for s in range(start, start + run, num_generations)]
    return out


def trainer_mode(columns: dict) -> str | None:
    """'train' or 'eval' as TRL's GRPOTrainer itself decides it (`model.training`), read from the trainer
    whose bound `_log_metric` it passes as the `log_metric` keyword (trl 1.16); None for other callers."""
    trainer = getattr(columns.get("log_metric"), "__self__", None)
    training = getattr(getattr(trainer, "model", None), "training", None)
    return None if not isinstance(training, bool) else "train" if training else "eval"


def group_size(prompts: Sequence, columns: dict, num_generations: int, num_generations_eval: int | None) -> int:
    """One call's group size. TRL calls the same reward function in training (groups of num_generations)
    and evaluation (num_generations_eval) without saying which: the calling trainer's mode decides; for
    another caller, the size every run of equal prompts is a multiple of (the larger where both are)."""
    if num_generations_eval is None or num_generations_eval == num_generations:
        return num_generations
    mode = trainer_mode(columns)
    if mode is not None:
        return num_generations if mode == "train" else num_generations_eval
    lengths = [n for _, n in runs(prompts)]
    fits = [g for g in (num_generations, num_generations_eval) if all(n % g == 0 for n in lengths)]
    return max(fits, default=num_generations)       # none fits: `groups` names the numbers


def prompt_groups(prompts: Sequence) -> list[list[int]]:
    """Indices grouped by equal prompt text wherever they sit (first appearance order): for callers
    that do not say how many completions each prompt has (OpenRLHF's remote reward model)."""
    out: dict[str, list[int]] = {}
    for i, p in enumerate(prompts):
        out.setdefault(as_text(p), []).append(i)
    return list(out.values())


def bradley_terry(wins, n: int, iters: int = 200) -> list[float]:
    """Log-strengths from soft win counts wins[i][j] (MM algorithm, mean-centred)."""
    p = [1.0] * n
    for _ in range(iters):
        new = []
        for i in range(n):
            w = math.fsum(wins[i][j] for j in range(n) if j != i)       # exact sums: a permuted group
            d = math.fsum((wins[i][j] + wins[j][i]) / (p[i] + p[j]) for j in range(n) if j != i)
            new.append(max(w, 1e-9) / d if d > 0 else p[i])               # gets the permuted strengths
        g = math.exp(math.fsum(math.log(v) for v in new) / n)
        p = [v / g for v in new]
    return [math.log(v) for v in p]


METHODS = ("mean_win", "bradley_terry")
NEUTRAL = {"mean_win": 0.5, "bradley_terry": 0.0}     # reward of a completion with no rival


def check_num_generations(n, *, name: str = "num_generations", least: int = 2) -> None:
    """GRPO compares each prompt's completions with each other: at least two (one in evaluation, where a
    lone completion gets the neutral reward)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < least:
        raise ValueError(f"{name} must be an integer of at least {least} (GRPO's completions per prompt), "
                         f"got {n!r}")


def grpo_sizes(num_generations: int, num_generations_eval: int | None) -> tuple[int, int | None]:
    """Checked (num_generations, num_generations_eval); evaluation groups of one are judged neutral."""
    check_num_generations(num_generations)
    if num_generations_eval is not None:
        check_num_generations(num_generations_eval, name="num_generations_eval", least=1)
        if num_generations_eval == 1:
            log.warning("num_generations_eval=1: every evaluation reward is the neutral one (a pairwise judge "
                        "compares a prompt's completions with each other; a lone completion has no rival)")
    return num_generations, num_generations_eval


def check_method(method: str) -> None:
    if method not in METHODS:
        raise ValueError("method must be 'mean_win' or 'bradley_terry'")


def round_robin(gs: Sequence[Sequence[int]], texts: Sequence[str] | None = None) -> list[tuple[int, int, int]]:
    """(group number, i, j) for every pair inside each group, judged once: i < j, or with `texts` the
    response whose text sorts first is i. Then a pair's request depends on the two texts, not on their
    positions, so a shuffled group gets the same judgments and a duplicated completion the same ones
    as its twin (and `group_rewards` sums exactly, so their rewards are bit-equal)."""
    out = [(g, i, j) for g, idx in enumerate(gs) for i in idx for j in idx if i < j]
    if texts is not None:
        out = [(g, j, i) if texts[j] < texts[i] else (g, i, j) for g, i, j in out]
    return out


def group_rewards(n: int, gs: Sequence[Sequence[int]], todo, p, *, method: str) -> list[float]:
    """One reward per completion from P(i beats j) of the round robin `todo` (see `round_robin`)."""
    rewards = [NEUTRAL[method]] * n
    wins = [[[0.0] * len(idx) for _ in idx] for idx in gs]
    pos = [{k: m for m, k in enumerate(idx)} for idx in gs]
    for (g, i, j), pij in zip(todo, p):
        wins[g][pos[g][i]][pos[g][j]], wins[g][pos[g][j]][pos[g][i]] = pij, 1.0 - pij
    for g, idx in enumerate(gs):
        if len(idx) < 2:
            continue
        vals = (bradley_terry(wins[g], len(idx)) if method == "bradley_terry"
                else [math.fsum(row) / (len(idx) - 1) for row in wins[g]])   # exact sums: order-free
        for k, v in zip(idx, vals):
            rewards[k] = float(v)
    return rewards


def pair_index(e) -> int | None:
    """Which pair of its call an error names: a PromptTooLong's pair id judge-k (`Judge.pairs`), or a
    JudgeServerError's `pair` (the server's structured 422, placed in the call by the client)."""
    k = getattr(e, "pair", None)
    if isinstance(e, PromptTooLong):
        k = (e.pair_id or "").removeprefix("judge-")
        k = int(k) if k.isdigit() else None
    return k if isinstance(k, int) else None


def named_by_caller(e, todo, noun: str = "completions"):
    """An error naming pair k of the call made of `todo` ((group, i, j) each: the round robin, or
    OnlineDPO's halves), renamed in the caller's indices, as `noun` i and j; else `e` itself."""
    k = pair_index(e)
    if k is None or k >= len(todo):
        return e
    i, j = sorted(todo[k][1:])
    where = f"of {noun} {i} and {j} (0-based)"
    return e.with_fix(e.fix, where=where) if isinstance(e, PromptTooLong) else e.named(where)


def pair_texts(prompts: Sequence, texts: Sequence[str], todo) -> tuple[list[str], list[str], list[str]]:
    """The (question, a, b) lists of the round robin `todo`."""
    return ([as_question(prompts[i]) for _, i, _ in todo], [texts[i] for _, i, _ in todo],
            [texts[j] for _, _, j in todo])


def grpo_plan(prompts: Sequence, completions: Sequence, num_generations: int):
    """-> (groups, round robin, completion texts) of one GRPO call."""
    if len(prompts) != len(completions):
        raise InputError(f"{len(prompts)} prompts for {len(completions)} completions")
    gs = [list(g) for g in groups(prompts, num_generations)]
    texts = [as_text(c) for c in completions]
    return gs, round_robin(gs, texts), texts


def grpo_reward(judge, *, num_generations: int, num_generations_eval: int | None = None,
                method: str = "mean_win"):
    """Reward function for GRPOTrainer: one reward per completion from its group's pairwise judgments.
    num_generations_eval: GRPOConfig's, where it differs (TRL evaluates with the same reward function)."""
    check_method(method)
    sizes = grpo_sizes(num_generations, num_generations_eval)

    def baer_grpo(prompts: Sequence, completions: Sequence, completion_ids=None, **columns) -> list[float]:
        gs, todo, texts = grpo_plan(prompts, completions, group_size(prompts, columns, *sizes))
        fields = pair_fields(columns, [i for _, i, _ in todo])
        try:
            p = judge.prob_a(*pair_texts(prompts, texts, todo), **fields).tolist() if todo else []
        except NAMED as e:                        # named as the trainer's completions, not round-robin pairs
            raise named_by_caller(e, todo) from None
        return group_rewards(len(completions), gs, todo, p, method=method)
    return baer_grpo


def remote_reward(url: str, *, trainer: str = "grpo", num_generations: int | None = None,
                  num_generations_eval: int | None = None, method: str = "mean_win", api_key: str | None = None,
                  asynchronous: bool = False, timeout: float = 600.0, retries: int = 10):
    """The same reward functions, judged by a `baer-fast serve` at `url` (sync, or async for GRPOTrainer's
    async reward functions). trainer: "grpo" (needs num_generations) or "online_dpo". timeout, retries:
    JudgeClient's (seconds to wait for an answer; tries, a second apart, while the server is unreachable)."""
    from baer_fast.client import JudgeClient

    if trainer not in ("grpo", "online_dpo"):
        raise ValueError("trainer must be 'grpo' or 'online_dpo'")
    if trainer == "online_dpo" and asynchronous:
        raise ValueError("OnlineDPOTrainer calls its reward functions synchronously (trl 1.16), so an async one "
                         "would hand it a coroutine: use remote_reward(url, trainer='online_dpo') without "
                         "asynchronous=True")
    client = JudgeClient(url, api_key=api_key, timeout=timeout, retries=retries)
    if trainer == "online_dpo":
        return online_dpo_reward(client)
    if not asynchronous:
        return grpo_reward(client, num_generations=num_generations, num_generations_eval=num_generations_eval,
                           method=method)
    check_method(method)
    sizes = grpo_sizes(num_generations, num_generations_eval)

    async def baer_remote_grpo(prompts: Sequence, completions: Sequence, completion_ids=None,
                               **columns) -> list[float]:
        gs, todo, texts = grpo_plan(prompts, completions, group_size(prompts, columns, *sizes))
        fields = pair_fields(columns, [i for _, i, _ in todo])
        try:
            p = (await client.aprob_a(*pair_texts(prompts, texts, todo), **fields)).tolist() if todo else []
        except NAMED as e:
            raise named_by_caller(e, todo) from None
        return group_rewards(len(completions), gs, todo, p, method=method)
    return baer_remote_grpo


class BAERPairwiseJudge:
    """The shape of TRL<=1.0's BasePairwiseJudge: judge(prompts, completions) -> list[int].

    completions[i] is a pair [c0, c1]; the result is the index of the better one, or with
    `return_scores=True` (WinRateCallback(use_soft_judge=True)) P(c0 is better), as TRL's soft judges
    return it. BAER is order-symmetric by construction, so `shuffle_order` changes nothing and is
    accepted for compatibility.
    """

    def __init__(self, baer_judge):
        self.baer = baer_judge

    def judge(self, prompts: list, completions: list, shuffle_order: bool = True,
              return_scores: bool = False) -> list[int] | list[float]:
        if len(prompts) != len(completions) or any(len(c) != 2 for c in completions):
            raise InputError("completions must be a list of [c0, c1] pairs, one per prompt")
        if return_scores:
            return [float(p) for p in self.baer.prob_a(*self._pairs(prompts, completions)).tolist()]
        s = self.judge_model_scores(prompts, completions)
        return [0 if v >= 0 else 1 for v in s]

    def judge_model_scores(self, prompts, completions) -> list[float]:
        return self.baer.score(*self._pairs(prompts, completions)).tolist()

    @staticmethod
    def _pairs(prompts, completions) -> tuple[list, list[str], list[str]]:
        return ([as_question(p) for p in prompts], [as_text(c[0]) for c in completions],
                [as_text(c[1]) for c in completions])
