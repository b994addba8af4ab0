from hypothesis import given, settings, strategies as st

from baer_fast.bank.truncation import sanitize, shared_cap


@settings(max_examples=500)
@given(st.integers(0, 5000), st.integers(0, 5000), st.integers(1, 4000))
def test_shared_cap_fits_and_is_symmetric(la, lb, room):
    t = shared_cap(la, lb, room)
    assert t == shared_cap(lb, la, room)
    assert min(la, t) + min(lb, t) <= room
    # maximal: one more token would not fit (unless both already fit whole)
    if min(la, t + 1) + min(lb, t + 1) > min(la, t) + min(lb, t):
        assert min(la, t + 1) + min(lb, t + 1) > room


def test_sanitize_repairs_lone_surrogates_only():
    assert sanitize("plain é 😀") == "plain é 😀"
    fixed = sanitize("a\udcffb")
    fixed.encode("utf-8")
    assert fixed.startswith("a") and fixed.endswith("b")


def _tok(qwen_dir):
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(qwen_dir)


def test_a_budget_the_context_cannot_hold_is_an_error_not_a_one_character_cut(qwen_dir):
    """reference's default budget (4096) on a 4096-token judge: the room was negative, and --truncate and
    Judge cut every pair to one character, silently. Its whole budget must stay free (its verdict prompt
    holds the generated solution beside the response), so the cut now refuses, naming the budget."""
    import pytest

    from baer_fast.bank.truncation import cut_room, prompt_overhead, room_for
    from baer_fast.errors import InputError
    tok = _tok(qwen_dir)
    experts = ["direct", "reference"]
    assert room_for(tok, 4096, experts) == 4096 - max(prompt_overhead(tok, experts).values()) - 4096
    with pytest.raises(InputError, match=r"\(4096 tokens\) leaves -\d+ tokens.*--max-new-tokens"):
        cut_room(tok, 4096, experts)


def test_prepair_keeps_both_analyses_free_and_a_native_expert_its_generation(qwen_dir):
    """prepair's verdict holds both orders' analyses (two budgets); `cot_native` runs cot's generation,
    so a head listing only the native expert keeps cot's budget free too (Judge passes such names as is)."""
    from baer_fast.bank.generative import GenerationConfig
    from baer_fast.bank.truncation import prompt_overhead, room_for
    tok, gen = _tok(qwen_dir), GenerationConfig(max_new_tokens={"prepair": 100, "cot": 120})
    assert room_for(tok, 4096, ["prepair"], gen) == 4096 - prompt_overhead(tok, ["prepair"])["prepair"] - 200
    assert room_for(tok, 4096, ["direct", "cot_native"], gen) == room_for(tok, 4096, ["direct", "cot"], gen)
    assert room_for(tok, 4096, ["direct", "cot"], gen) == 4096 - prompt_overhead(tok, ["direct", "cot"])["cot"] - 120


def test_a_budget_below_the_cue_room_still_leaves_room_to_generate(qwen_dir):
    """cot=24: the reserve was 24 tokens, fewer than the 64 the decoder keeps for the cue, so a pair cut
    to the room was refused with "leaves no room to generate" (Judge promises every pair a score)."""
    from baer_fast.bank.generative import CUE_ROOM, GenerationConfig
    from baer_fast.bank.truncation import fit_pair, over_long, room_for
    from baer_fast.io.records import Pair
    tok, gen = _tok(qwen_dir), GenerationConfig(max_new_tokens={"cot": 24})
    room = room_for(tok, 1024, ["cot"], gen)
    cut = fit_pair(tok, "q " * 50, "seven " * 2000, "eight " * 2000, room=room)
    assert cut.truncated
    assert over_long([Pair("p", cut.question, cut.response_a, cut.response_b)], tok, 1024, ["cot"], gen) == []
    assert room <= 1024 - (CUE_ROOM + 1)


def test_a_context_that_holds_no_pair_is_an_error_naming_it(qwen_dir):
    import pytest

    from baer_fast.bank.truncation import cut_room
    from baer_fast.errors import InputError
    with pytest.raises(InputError, match=r"context window of 'tiny' \(200 tokens\) leaves -?\d+ tokens.*longer context"):
        cut_room(_tok(qwen_dir), 200, ["direct", "cot"], name="tiny")
    assert cut_room(_tok(qwen_dir), 200, ["direct"], name="tiny") > 32       # the single-pass prompt fits
