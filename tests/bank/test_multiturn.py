"""Multi-turn questions: every protocol sends the conversation's earlier turns as chat messages
through the model's template (shared by every prompt of the pair), the runs mirror under a swap,
and symmetric truncation cuts a conversation's turns to one common cap."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from baer_fast import protocols
from baer_fast.io.records import Pair
from baer_fast.io.text_stats import question_text
from baer_fast.protocols.base import Prompt
from baer_fast.bank.generative import GenerationConfig
from baer_fast.bank.prompting import PromptEncoder
from baer_fast.bank.runner import run_experts
from baer_fast.bank.truncation import common_cap, fit_pair
from tests.fixtures.checks import max_run_diff
from tests.fixtures.tiny_models import make_pairs

GEN = GenerationConfig(max_new_tokens={n: 4 for n in protocols.GENERATIVE}, seed=3)
TURNS = (("user", "first question about python code"), ("assistant", "an answer with a list"),
         ("user", "and which one is better?"))


def conversation_pairs(n: int, seed: int) -> list[Pair]:
    base = make_pairs(n, seed=seed)
    return [Pair(p.id, ((TURNS[0][0], f"{TURNS[0][1]} {i}"),) + TURNS[1:] if i % 2 else TURNS,
                 p.response_a, p.response_b, label=p.label, split=p.split) for i, p in enumerate(base)]


def _all_prompts(q, a, b) -> list[Prompt]:
    out = []
    for name in protocols.ALL:
        mod = protocols.get(name)
        if name in protocols.GENERATIVE:
            gens = mod.generations(q, a, b)
            out += [g.prompt for g in gens]
            texts = {g.key: ["some analysis"] * max(g.samples, 1) for g in gens}
            out += [v for v in mod.verdicts(q, a, b, texts) if isinstance(v, Prompt)]
        elif hasattr(mod, "prompts"):
            out += mod.prompts(q, a, b)
    return out


def test_every_protocol_sends_the_earlier_turns_as_messages():
    prompts = _all_prompts(TURNS, "resp one", "resp two")
    assert len(prompts) > 20
    for p in prompts:
        msgs = p.messages()
        assert msgs[0]["role"] == "system" and msgs[-1]["role"] == "user"
        assert [(m["role"], m["content"]) for m in msgs[1:3]] == list(TURNS[:2]), p.key
        assert TURNS[2][1] in msgs[-1]["content"] and TURNS[0][1] not in msgs[-1]["content"]
        folded = p.messages(fold_system=True)
        assert folded[0]["content"].startswith(p.system) and folded[0]["content"].endswith(TURNS[0][1])


def test_a_one_turn_conversation_is_the_string_question():
    one = _all_prompts((("user", "what is 2+2?"),), "4", "5")
    plain = _all_prompts("what is 2+2?", "4", "5")
    assert [p.messages() for p in one] == [p.messages() for p in plain]


def test_rendered_prompts_share_the_conversation_prefix(qwen_dir, loaded_models):
    enc = PromptEncoder.of(loaded_models(qwen_dir))
    prompts = [p for p in _all_prompts(TURNS, "resp one", "resp two")]
    texts = [enc.render(p) for p in prompts]
    history = "".join(f"<|im_start|>{r}\n{c}<|im_end|>\n" for r, c in TURNS[:2])
    for t in texts:
        assert t.split("<|im_end|>\n", 1)[1].startswith(history)
    ids = enc.encode_all((p, "x", "e") for p in prompts)
    n_shared = len(enc.tok(texts[0].split(history)[0] + history, add_special_tokens=False)["input_ids"])
    assert all(i[:n_shared] == ids[0][:n_shared] for i in ids)


def test_multi_turn_runs_mirror_under_a_swap(qwen_dir, loaded_models):
    loaded = loaded_models(qwen_dir)
    names = list(protocols.SINGLE_PASS) + list(protocols.GENERATIVE)
    pairs = conversation_pairs(2, seed=11)
    sig = run_experts(loaded, pairs, experts=names, generation=GEN)
    swapped = run_experts(loaded, [p.swapped() for p in reversed(pairs)], experts=names, generation=GEN)
    assert [s.swapped().experts.keys() for s in sig] == [t.experts.keys() for t in reversed(swapped)]
    assert max_run_diff([s.swapped() for s in sig], list(reversed(swapped)), names) == 0   # exact: same contents
    for s, p in zip(sig, pairs):
        assert s.meta["len_q"] == len(question_text(p.question))     # all the turns' text, not the turn count


class _CharTok:
    """One token per character: cuts are exact, so the test's bounds are exact too."""

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [ord(c) for c in text]}

    def decode(self, ids):
        return "".join(map(chr, ids))


def test_truncated_conversation_is_swap_invariant_and_fair():
    long_turn = "x" * 900
    q = (("user", "short opening"), ("assistant", long_turn), ("user", "y" * 700))
    cut = fit_pair(_CharTok(), q, "a" * 600, "b" * 50, room=1200)
    flipped = fit_pair(_CharTok(), q, "b" * 50, "a" * 600, room=1200)
    assert cut.truncated and cut.question == flipped.question
    assert (cut.response_a, cut.response_b) == (flipped.response_b, flipped.response_a)
    lens = [len(c) for _, c in cut.question]
    assert lens[0] == len("short opening")            # a short early turn keeps all of itself
    assert lens[1] == lens[2] < 700                   # the long turns share one cap
    assert sum(lens) + len(cut.response_a) + len(cut.response_b) <= 1200
    assert [r for r, _ in cut.question] == ["user", "assistant", "user"]


@settings(max_examples=300)
@given(st.lists(st.integers(0, 3000), min_size=1, max_size=6), st.integers(0, 5000))
def test_common_cap_is_the_largest_fitting_cap(lengths, room):
    t = common_cap(lengths, room)
    assert t == common_cap(list(reversed(lengths)), room)
    assert sum(min(n, t) for n in lengths) <= room
    if sum(min(n, t + 1) for n in lengths) > sum(min(n, t) for n in lengths):
        assert sum(min(n, t + 1) for n in lengths) > room


@pytest.mark.parametrize("bad, why", [
    ([{"role": "assistant", "content": "x"}], "expected a 'user' turn"),
    ([{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}], "must end with the user turn"),
    ([{"role": "system", "content": "x"}], "is not one of"),
    ([{"role": "user", "content": 3}], "content must be a string"),
])
def test_bad_conversations_name_the_line_and_field(tmp_path, bad, why):
    import json

    from baer_fast.errors import InputError
    from baer_fast.io.records import read_pairs

    f = tmp_path / "p.jsonl"
    f.write_text(json.dumps({"id": "1", "question": bad, "response_a": "a", "response_b": "b"}) + "\n")
    with pytest.raises(InputError, match=why) as e:
        read_pairs(str(f))
    assert (e.value.line, e.value.field) == (1, "question")


def test_conversation_pairs_round_trip(tmp_path):
    from baer_fast.io.records import read_pairs, write_pairs

    pairs = conversation_pairs(3, seed=2)
    write_pairs(str(tmp_path / "p.jsonl"), pairs)
    assert read_pairs(str(tmp_path / "p.jsonl")) == pairs
