"""Symmetric truncation: fit a pair into the judge's context without favouring either side.

Both responses are cut to the same token cap T (a response shorter than T keeps all of
itself), so (q, a, b) and (q, b, a) are cut identically and the swap invariant survives.
The question is capped at a quarter of the room; a conversation's turns share that cap the
same way (every turn keeps min(its length, T), one T for all, so a long last turn cannot take
the earliest turns' room). Text that is not valid UTF-8 (lone surrogates) is replaced with
U+FFFD first. Used by the in-process Judge, where every pair must get a score, and by
`experts` / `score --model` with `--truncate` (without it they refuse an over-long pair).
"""
from __future__ import annotations

from dataclasses import dataclass

from baer_fast.errors import InputError

CHARS_PER_TOKEN_MAX = 32   # pre-cut huge texts to 32 chars per token of room before tokenizing
SAFETY_TOKENS = 32         # re-tokenising a cut text can shift a few BPE merges at the boundary
TURN_TOKENS = 16           # chat-template tokens around each earlier turn of a conversation
MIN_TEXT_TOKENS = 32       # fewer left for question and responses (after SAFETY_TOKENS): no pair to judge


@dataclass(frozen=True)
class Cut:
    question: object           # str, or a conversation: tuple of (role, content) turns
    response_a: str
    response_b: str
    truncated: bool


def sanitize(text: str) -> str:
    """Replace anything that cannot be encoded as UTF-8 (lone surrogates) with U+FFFD."""
    return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace") if _has_surrogates(text) else text


def _has_surrogates(text: str) -> bool:
    try:
        text.encode("utf-8")
        return False
    except UnicodeEncodeError:
        return True


def shared_cap(len_a: int, len_b: int, room: int) -> int:
    """Largest T with min(len_a, T) + min(len_b, T) <= room; symmetric in (len_a, len_b)."""
    short = min(len_a, len_b)
    return room - short if 2 * short <= room else room // 2


def _head(tokenizer, text: str, n_tokens: int) -> tuple[str, int]:
    """First n_tokens of text (decoded) and the full token count of the pre-cut text."""
    pre = text[: CHARS_PER_TOKEN_MAX * max(n_tokens, 1)]
    ids = tokenizer(pre, add_special_tokens=False)["input_ids"]
    if len(ids) <= n_tokens and len(pre) == len(text):
        return text, len(ids)
    return tokenizer.decode(ids[:n_tokens]), len(ids)


def common_cap(lengths, room: int) -> int:
    """Largest T with sum(min(n, T)) <= room over `lengths` (water-filling; order-free)."""
    rest, left = sorted(lengths), room
    for i, n in enumerate(rest):
        if n * (len(rest) - i) > left:
            return left // (len(rest) - i)
        left -= n
    return max(rest, default=0) + left


def fit_pair(tokenizer, question, a: str, b: str, *, room: int) -> Cut:
    """Cut (question, a, b) so their tokens fit in `room` (context minus prompt overhead).
    `question` is a string or a conversation ((role, content) turns); a conversation's turns
    are cut to one common cap and each earlier turn also costs TURN_TOKENS of template."""
    a, b = sanitize(a), sanitize(b)
    turns = [("user", question)] if isinstance(question, str) else list(question)
    turns = [(r, sanitize(c)) for r, c in turns]
    room = max(room - SAFETY_TOKENS - TURN_TOKENS * (len(turns) - 1), 3)
    heads = [_head(tokenizer, c, room) for _, c in turns]
    lens = [n for _, n in heads]
    n_q = sum(lens)
    _, n_a = _head(tokenizer, a, room)
    _, n_b = _head(tokenizer, b, room)
    whole = all(h == c for (h, _), (_, c) in zip(heads, turns))
    if n_q + n_a + n_b <= room and whole:
        return Cut(_as_question(question, turns), a, b, False)
    q_cap = min(n_q, max(room // 4, room - n_a - n_b))
    t_cap = common_cap(lens, q_cap)
    cut_turns = [(r, _head(tokenizer, c, t_cap)[0] if n > t_cap or h != c else c)
                 for (r, c), (h, n) in zip(turns, heads)]
    cap = shared_cap(n_a, n_b, room - sum(min(n, t_cap) for n in lens))
    return Cut(_as_question(question, cut_turns), _head(tokenizer, a, cap)[0], _head(tokenizer, b, cap)[0], True)


def _as_question(question, turns):
    return turns[0][1] if isinstance(question, str) else tuple(turns)


def _prompts(experts, question, a: str, b: str):
    """(prompt, expert, generates) of every prompt `experts` send for (question, a, b): the prompt
    experts' verdict prompts (a derived expert's source's) and the generative experts' generation
    prompts (a native expert's come from its generative one)."""
    from baer_fast import protocols

    for e in protocols.prompt_experts_for(experts):
        for p in protocols.get(e).prompts(question, a, b):
            yield p, e, False
    for e in dict.fromkeys(protocols.base_of(x) for x in experts if x in protocols.GENERATIVE + protocols.NATIVE):
        for g in protocols.get(e).generations(question, a, b):
            yield g.prompt, e, True


GENERATIONS_IN_VERDICT = {"prepair": 2}     # generated texts a verdict prompt holds (default 1)


def generation_reserve(expert: str, budget: int) -> int:
    """Context a generative expert keeps free for what it generates: its whole token budget, since
    rubric's and reference's verdict prompts hold their generated text beside the responses and the
    decoder caps a generation only against its own (question-only) prompt; twice it for prepair,
    whose verdict holds both orders' analyses; at least the CUE_ROOM + 1 the decoder needs."""
    from baer_fast.bank.generative import CUE_ROOM
    return max(CUE_ROOM + 1, budget * GENERATIONS_IN_VERDICT.get(expert, 1))


def largest_budget(expert: str, free: int) -> int:
    """The largest budget whose generation_reserve fits in `free` tokens; 0 when even the CUE_ROOM + 1
    the decoder needs does not."""
    from baer_fast.bank.generative import CUE_ROOM
    budget = free // GENERATIONS_IN_VERDICT.get(expert, 1)
    return budget if budget >= CUE_ROOM + 1 else 0


def prompt_overhead(tokenizer, experts, *, name: str = "the model") -> dict[str, int]:
    """expert -> tokens of its longest prompt (verdict or generation) for an empty pair."""
    from baer_fast.bank.prompting import PromptEncoder

    enc = PromptEncoder(tokenizer, model_name=name, context_len=1 << 62)
    items = list(_prompts(experts, "", "", ""))
    out: dict[str, int] = {}
    for (_, e, _), ids in zip(items, enc.encode_all((p, "-", e) for p, e, _ in items)):
        out[e] = max(out.get(e, 0), len(ids))
    return out


def _overhead_reserve(tokenizer, context_len: int, experts, generation, name: str) -> tuple[int, int]:
    """(the longest prompt's fixed text of `experts`, their generative experts' generation reserve)."""
    from baer_fast import protocols
    from baer_fast.bank.generative import GenerationConfig

    overhead = max(prompt_overhead(tokenizer, experts, name=name).values(), default=0)
    gen = generation or GenerationConfig()
    generative = {protocols.base_of(e) for e in experts if e in protocols.GENERATIVE + protocols.NATIVE}
    reserve = max((generation_reserve(e, gen.budget(e)) for e in generative), default=0)
    return overhead, reserve


def room_for(tokenizer, context_len: int, experts, generation=None, *, name: str = "the model") -> int:
    """Tokens left for question + responses after the longest prompt's fixed text of `experts`
    (verdict and generation prompts), less the generation reserve of their generative experts
    (reasoning must fit too)."""
    overhead, reserve = _overhead_reserve(tokenizer, context_len, experts, generation, name)
    return context_len - overhead - reserve


def cut_room(tokenizer, context_len: int, experts, generation=None, *, name: str = "the model") -> int:
    """room_for, the room `--truncate` and Judge cut pairs to; one that leaves fewer than
    SAFETY_TOKENS + MIN_TEXT_TOKENS is an InputError (a cut would leave no pair to judge)."""
    overhead, reserve = _overhead_reserve(tokenizer, context_len, experts, generation, name)
    room = context_len - overhead - reserve
    if room - SAFETY_TOKENS < MIN_TEXT_TOKENS:
        raise InputError(f"the context window of {name!r} ({context_len} tokens) leaves {room} tokens for a pair's "
                         f"question and responses with these experts (their prompts take {overhead}"
                         + (f", generation keeps {reserve} free" if reserve else "") + f"), fewer than the "
                         f"{SAFETY_TOKENS + MIN_TEXT_TOKENS} a cut pair needs: use a judge with a longer context"
                         + (", smaller generation budgets (--max-new-tokens; `check` prints what fits) or fewer "
                            "generative experts" if reserve else ""), field="experts")
    return room


def over_long(pairs, tokenizer, context_len: int, experts, generation=None, *, name: str = "the model") -> list:
    """[(pair, why)] for the pairs the engine would refuse: a verdict prompt longer than the context,
    or a generation prompt that leaves no room to generate (bank/generative.CUE_ROOM). Pairs whose
    texts fit `room_for` less SAFETY_TOKENS are known to fit; only the others are rendered."""
    from baer_fast.bank.generative import CUE_ROOM
    from baer_fast.bank.prompting import PromptEncoder
    from baer_fast.errors import PromptTooLong
    from baer_fast.io.text_stats import question_text

    room = room_for(tokenizer, context_len, experts, generation, name=name) - SAFETY_TOKENS
    enc = PromptEncoder(tokenizer, model_name=name, context_len=1 << 62)
    out = []
    for p in pairs:
        texts = (question_text(_sanitized(p.question)), sanitize(p.response_a), sanitize(p.response_b))
        turns = 1 if isinstance(p.question, str) else len(p.question)      # each earlier turn: template tokens
        if sum(len(ids) for ids in tokenizer(list(texts), add_special_tokens=False)["input_ids"]) \
                <= room - TURN_TOKENS * (turns - 1):
            continue
        items = list(_prompts(experts, p.question, p.response_a, p.response_b))
        for (prompt, e, generates), ids in zip(items, enc.encode_all((q, p.id, e) for q, e, _ in items)):
            limit = context_len - CUE_ROOM - 1 if generates else context_len
            if len(ids) > limit:
                what = "leaves no room to generate in" if generates else "is longer than"
                out.append((p, PromptTooLong(f"the {e}/{prompt.key} prompt is {len(ids)} tokens and {what} the "
                                             f"context window of {name!r} ({context_len})").message))
                break
    return out


def _sanitized(question):
    return sanitize(question) if isinstance(question, str) else tuple((r, sanitize(c)) for r, c in question)


def cut_pairs(pairs, tokenizer, room: int) -> tuple[list, int]:
    """Each pair that does not fit `room` cut by fit_pair and marked meta.truncated; (pairs, how many)."""
    import dataclasses

    out, n_cut = [], 0
    for p in pairs:
        cut = fit_pair(tokenizer, p.question, p.response_a, p.response_b, room=room)
        if cut.truncated:
            n_cut += 1
            p = dataclasses.replace(p, question=cut.question, response_a=cut.response_a,
                                    response_b=cut.response_b, meta={**p.meta, "truncated": True})
        out.append(p)
    return out, n_cut
