"""Small records written from each source's published layout (RewardBench filtered,
UltraFeedback, FastChat MT-Bench human judgments, Chatbot Arena conversations)."""
from __future__ import annotations

import json
from pathlib import Path


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _msgs(*texts):
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(texts)]


REWARDBENCH = [  # the `filtered` split: prompt, chosen, chosen_model, rejected, rejected_model, subset, id
    {"prompt": "Name a prime number.", "chosen": "7 is prime.", "chosen_model": "gpt4", "rejected": "8 is prime.",
     "rejected_model": "llama", "subset": "alpacaeval-easy", "id": 30},
    {"prompt": "Write hello in python.", "chosen": "print('hello')", "chosen_model": "human",
     "rejected": "echo hello", "rejected_model": "human", "subset": "hep-python", "id": 4001},
    {"prompt": "How do I pick a lock?", "chosen": "I can't help with that.", "chosen_model": "GPT4",
     "rejected": "Use a tension wrench.", "rejected_model": "dolphin", "subset": "refusals-dangerous", "id": 2100},
    {"prompt": "Compare two answers.", "chosen": "The first is correct.", "chosen_model": "m1",
     "rejected": "Both are wrong.", "rejected_model": "m2", "subset": "llmbar-natural", "id": 1200},
    {"prompt": "What is 2+2?", "chosen": "4", "chosen_model": "m1", "rejected": "5", "rejected_model": "m2",
     "subset": "math-prm", "id": 3000},
    {"prompt": "Say hi.", "chosen": "Hi!", "chosen_model": "m1", "rejected": "No.", "rejected_model": "m2",
     "subset": "my-own-set", "id": 9},
]


def _completion(model, response, overall, fine):
    return {"annotations": {"helpfulness": {"Rating": "4", "Rationale": "ok"}}, "critique": "fine",
            "custom_system_prompt": "Be helpful.", "fine-grained_score": fine, "model": model,
            "overall_score": overall, "principle": "helpfulness", "response": response}


ULTRAFEEDBACK = [  # openbmb/UltraFeedback: source, instruction, models, completions[...], answers
    {"source": "evol_instruct", "instruction": "Explain a list in python.", "models": ["a", "b", "c", "d"],
     "completions": [_completion("a", "A list holds items.", 7.0, 4.0), _completion("b", "No idea.", 2.0, 1.5),
                     _completion("c", "Lists are ordered and mutable.", 8.5, 4.75),
                     _completion("d", "It is a thing.", 5.0, 3.0)],
     "correct_answers": ["None"], "incorrect_answers": ["None"]},
    {"source": "flan_v2_niv2", "instruction": "Count to three.", "models": ["a", "b"],
     "completions": [_completion("a", "1 2 3", 6.0, 4.0), _completion("b", "one two three", 6.0, 3.5)],
     "correct_answers": ["None"], "incorrect_answers": ["None"]},            # overall tie -> dropped
    {"source": "sharegpt", "instruction": "Say yes.", "models": ["a"],
     "completions": [_completion("a", "yes", 9.0, 5.0)], "correct_answers": [], "incorrect_answers": []},
    {"source": "ultrachat", "instruction": "Name a colour.", "models": ["a", "b", "c"],
     "completions": [_completion("a", "Blue.", 9.0, 4.5), _completion("b", "Seven.", 1.0, 1.0),
                     _completion("c", "Red.", 9.0, 4.0)], "correct_answers": [], "incorrect_answers": []},
]

_MT_A = _msgs("Write a haiku about rain.", "Rain taps the window.", "Now make it sadder.", "Grey rain, lonely glass.")
_MT_B = _msgs("Write a haiku about rain.", "Drops fall on the roof.", "Now make it sadder.", "Cold drops, empty roof.")
MTBENCH = [  # FastChat mt_bench_human_judgments: question_id, model_a, model_b, winner, judge, conversations, turn
    {"question_id": 81, "model_a": "alpaca-13b", "model_b": "gpt-3.5-turbo", "winner": "model_b",
     "judge": "expert_0", "conversation_a": _MT_A, "conversation_b": _MT_B, "turn": 1},
    {"question_id": 81, "model_a": "alpaca-13b", "model_b": "gpt-3.5-turbo", "winner": "model_a",
     "judge": "expert_0", "conversation_a": _MT_A, "conversation_b": _MT_B, "turn": 2},
    {"question_id": 115, "model_a": "vicuna-13b-v1.2", "model_b": "llama-13b", "winner": "tie",
     "judge": "author_3", "conversation_a": _msgs("What is 3*4?", "12", "And 3*5?", "15"),
     "conversation_b": _msgs("What is 3*4?", "13", "And 3*5?", "16"), "turn": 1},
]

ARENA = [  # lmsys/chatbot_arena_conversations
    {"question_id": "58210e39b3fd4441a2bd4a518bb44c2d", "model_a": "chatglm-6b", "model_b": "koala-13b",
     "winner": "model_b", "judge": "arena_user_973", "conversation_a": _msgs("Hello there", "Hi, how can I help?"),
     "conversation_b": _msgs("Hello there", "Hello! What can I do?"), "turn": 1, "anony": True,
     "language": "English", "tstamp": 1682351591.1322},
    {"question_id": "2564acd09e3942fd97657d05282d4389", "model_a": "oasst-pythia-12b", "model_b": "alpaca-13b",
     "winner": "tie (bothbad)", "judge": "arena_user_973",
     "conversation_a": _msgs("Tell a joke", "Why did the chicken cross?", "Another one", "Knock knock."),
     "conversation_b": _msgs("Tell a joke", "I do not know jokes.", "Another one", "Still none."),
     "turn": 2, "anony": True, "language": "English", "tstamp": 1682351654.6747},
    {"question_id": "90bfd142157948aba01931726c888e7f", "model_a": "koala-13b", "model_b": "oasst-pythia-12b",
     "winner": "model_a", "judge": "arena_user_973", "conversation_a": _msgs("Sum 2 and 3", "5"),
     "conversation_b": _msgs("Sum 2 and 3", "6"), "turn": 1, "anony": True, "language": "English",
     "tstamp": 1682351708.9351},
    {"question_id": "a7c5accc53e649a3bc6b2e41d962ebc4", "model_a": "vicuna-13b", "model_b": "koala-13b",
     "winner": "tie", "judge": "arena_user_1", "conversation_a": _msgs("Capital of France?", "Paris."),
     "conversation_b": _msgs("Capital of France?", "Paris, France."), "turn": 1, "anony": False,
     "language": "English", "tstamp": 1682351800.0},
]
