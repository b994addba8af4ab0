"""MT-Bench human judgments (FastChat's `mt_bench_human_judgments`, lmsys) -> pairs.

Records `{question_id, model_a, model_b, winner, judge, conversation_a, conversation_b, turn}`:
winner `model_a`/`model_b`/`tie` (-> a/b/tie). The judged turn decides how much of each
conversation is shown: turn 1 -> the first question and the two first answers; turn 2 -> the
first question as the question, each model's first answer, the second question and its second
answer as its response (the models' first answers differ). Subset = `turn<N>`, category = the
question's MT-Bench category. Ids: `mtbench-<question_id>-t<turn>-<line>` (one per vote).
Several experts' votes on one comparison (question, turn, model pair in either order) are the
same texts: they share `meta.split_group` `mtbench-<question_id>-t<turn>-<models sorted>`, so
they share one split role (never fitted on and tested on).
Rows judged by GPT-4 (the dataset's `gpt4_pair` split, same columns, in the same snapshot) are
dropped and counted: their winner is a model's verdict, not a human label.
"""
from __future__ import annotations

from baer_fast.io.adapters import Imported
from baer_fast.io.adapters._rows import convert, rows, summary
from baer_fast.io.adapters.arena import battle_pair

# MT-Bench's 80 questions (FastChat's mt_bench question.jsonl): ten per category, ids 81..160
CATEGORIES = ("writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem", "humanities")


def category(question_id: int) -> str | None:
    i = (question_id - 81) // 10
    return CATEGORIES[i] if 81 <= question_id <= 160 else None


def _build(row):
    judge = row.obj.get("judge")
    if isinstance(judge, str) and judge.lower().startswith("gpt"):
        # the dataset's gpt4_pair split (same columns) holds GPT-4's verdicts: not a human label
        return "a model's verdict (judge gpt4_pair), not a human label"
    qid = row.need("question_id", int)
    turn = row.need("turn", int)
    if turn not in (1, 2):
        raise row.error(f"turn {turn} is not 1 or 2", "turn")
    models = "|".join(sorted((row.need("model_a"), row.need("model_b"))))
    return battle_pair(row, f"mtbench-{qid}-t{turn}-{row.line}", subset=f"turn{turn}",
                       category=category(qid), turns=turn, group=f"mtbench-{qid}-t{turn}-{models}")


def load(src: str, *, rejects=None, options=None) -> Imported:
    pairs, dropped = convert(rows(src, rejects), _build, rejects)
    out = Imported(pairs, dropped=dropped)
    out.notes.append(summary("mtbench-human", pairs))
    return out
