"""A cascade's stage 2 reads the prompt prefixes ([system][question][A][B] per order) that stage 1
computed for the pairs it leaves open (bank/prefix_store.py): exactly those tokens are not prefilled
again, the runs are the same within fp32 rounding, and nothing stays held after the call."""
from __future__ import annotations

import contextlib

import pytest

from baer_fast.bank import prefix_store
from tests.bank.test_cascade_reuse import PAIRS, _art, _calls


def _judge(model, art, *, invariant=False):
    from baer_fast.api import Judge, JudgeOptions
    from baer_fast.runtime.open import open_engine
    j = Judge(open_engine(model), art, options=JudgeOptions(batch_invariant=invariant))
    recs = j.signals([p.question for p in PAIRS], [p.response_a for p in PAIRS], [p.response_b for p in PAIRS])
    return j, recs


def _prefix_tokens(loaded, pairs) -> int:
    """Tokens of the pairs' prefixes as the engine's trees hold them: pairs of one question share
    one group (bank/queries.share_questions), so their [system][question] counts once."""
    from baer_fast.bank.generative import pairwise_prefixes
    from baer_fast.bank.prompting import PromptEncoder
    from baer_fast.runtime.plan.prefix_tree import build_tree, tree_tokens
    by_question: dict = {}
    for p, ps in zip(pairs, pairwise_prefixes(PromptEncoder.of(loaded), pairs)):
        by_question.setdefault(p.question, []).extend(ps)
    return sum(tree_tokens(build_tree(ps)) for ps in by_question.values())


def test_stage_two_prefills_the_open_pairs_prefixes_once(qwen_dir, monkeypatch):
    from baer_fast.bank.runner import run_experts
    from tests.fixtures.checks import max_run_diff
    from tests.fixtures.tolerances import naive_run_error, paths_tol
    art = _art(qwen_dir, ["direct", "score", "pride"], ["direct"])
    calls = _calls(monkeypatch)
    j, recs = _judge(qwen_dir, art)
    keep_calls = list(calls)
    calls.clear()
    monkeypatch.setattr(prefix_store, "keeping", lambda engine: contextlib.nullcontext())
    j0, plain = _judge(qwen_dir, art)
    open_ = [i for i, r in enumerate(recs) if "score" in r.experts]
    assert [i for i, r in enumerate(plain) if "score" in r.experts] == open_ and len(open_) == 6
    assert [c[:2] for c in keep_calls] == [c[:2] for c in calls] == [(12, ["direct"]), (6, ["score"])]
    assert keep_calls[0][2] == calls[0][2]                    # stage 1 prefills what it did
    assert calls[1][2] - keep_calls[1][2] == _prefix_tokens(j.engine.loaded, [PAIRS[i] for i in open_]) > 0
    tol = paths_tol(naive_run_error(j.engine.loaded, PAIRS, ["direct", "score"]))
    assert max_run_diff([recs[i] for i in open_], [plain[i] for i in open_], ["direct", "score", "pride"]) <= tol
    assert max_run_diff([r for r in recs if "score" not in r.experts], [r for r in plain if "score" not in r.experts],
                        ["direct"]) <= tol
    # the report counts what ran, once; an open pair now costs no more than under the full bank
    assert j.last_cascade["tokens_prefilled_per_pair"] * 12 == pytest.approx(sum(c[2] for c in keep_calls), abs=1e-9)
    cost = [sum(c["prefilled"] for c in recs[i].meta["expert_cost"].values()) for i in open_]
    full = run_experts(j.engine, [PAIRS[i] for i in open_], experts=["direct", "score", "pride"],
                       derived_params=art["derived_params"])
    assert sum(cost) <= sum(sum(c["prefilled"] for c in r.meta["expert_cost"].values()) for r in full)
    assert j.engine.prefix_store is None and j.engine.held_outside == 0


def test_batch_invariant_runs_keep_no_prefix(qwen_dir, monkeypatch):
    """A handed-in prefix's last bits are another call's: batch-invariant runs compute their own."""
    def refuse(engine):
        raise AssertionError("keeping used in a batch-invariant run")
    monkeypatch.setattr(prefix_store, "keeping", refuse)
    _judge(qwen_dir, _art(qwen_dir, ["direct", "score"], ["direct"]), invariant=True)


def test_store_keeps_within_its_budget_and_frees(loaded):
    from baer_fast.bank.prompting import PromptEncoder
    from baer_fast.bank.queries import build_all_queries, run_shared
    from baer_fast.runtime.prefill import PrefixEngine
    from tests.fixtures.tiny_models import make_pairs
    pairs = make_pairs(3, seed=8)
    engine = PrefixEngine(loaded)
    per = loaded.kv_bytes_per_token
    groups = [q for q, _ in build_all_queries(PromptEncoder.of(loaded), pairs, ["direct"])]
    with prefix_store.keeping(engine) as store:
        first = store._mine(pairs[:1])[0]
        store.left = sum(len(p) for p in first) * per          # room for the first pair's two prefixes only
        run_shared(engine, pairs, groups, store=store)
        assert set(store.kv) == set(first) and store.left == 0
        assert engine.held_outside == store.tokens() * per == sum(len(p) for p in first) * per
        assert [len(g) for g in store.given(pairs)] == [2, 0, 0]
        store.only(pairs[1:])
        assert store.kv == {} and engine.held_outside == 0 and store.left == sum(len(p) for p in first) * per
    assert engine.prefix_store is None


def test_swapped_batch_mirrors_exactly_with_the_store(qwen_dir):
    """The store is keyed by content and the engine runs canonical contents: a swapped batch (another
    call) exits the same pairs and reads the same prefixes, so its scores are the exact negatives."""
    from baer_fast.api import Judge, JudgeOptions
    from baer_fast.runtime.open import open_engine
    art = _art(qwen_dir, ["direct", "score", "pride"], ["direct"])
    j = Judge(open_engine(qwen_dir), art, options=JudgeOptions(batch_invariant=False))
    q = [p.question for p in PAIRS]
    a, b = [p.response_a for p in PAIRS], [p.response_b for p in PAIRS]
    s, t = j.score(q, a, b), j.score(q, b, a)
    assert (s == -t).all() and 0 < int((s != 0).sum())
    assert j.last_cascade["exited"] == 6


def _stage_one(engine, loaded, pairs, room_for: int):
    """Stage 1 (direct) through the store, with room for the first `room_for` pairs' prefixes."""
    from baer_fast.bank.prompting import PromptEncoder
    from baer_fast.bank.queries import build_all_queries, run_shared
    store = engine.prefix_store
    store.left = sum(len(p) for ps in store._mine(pairs[:room_for]) for p in ps) * loaded.kv_bytes_per_token
    run_shared(engine, pairs, [q for q, _ in build_all_queries(PromptEncoder.of(loaded), pairs, ["direct"])],
               store=store)
    return store


def test_the_last_stage_keeps_nothing(loaded):
    """After `only` (stage 2's pairs) nothing reads a kept prefix again: stage 2 keeps none (before, it
    kept the open pairs' prefixes stage 1 had no room for, to the end of the cascade)."""
    from baer_fast.bank.prompting import PromptEncoder
    from baer_fast.bank.queries import build_all_queries, run_shared
    from baer_fast.runtime.prefill import PrefixEngine
    from tests.fixtures.tiny_models import make_pairs
    pairs, engine = make_pairs(3, seed=8), PrefixEngine(loaded)
    with prefix_store.keeping(engine) as store:
        _stage_one(engine, loaded, pairs, 1)
        store.only(pairs[1:])                      # pair 0 exits; 1 and 2 are open, their prefixes not held
        groups = [q for q, _ in build_all_queries(PromptEncoder.of(loaded), pairs[1:], ["score"])]
        _, stats = run_shared(engine, pairs[1:], groups, store=store)
        assert store.kv == {} and engine.held_outside == 0
        assert stats.tokens_prefilled == sum(engine.plan_tokens(groups))



def test_an_error_inside_releases_the_kept_kv(loaded):
    """A stage that raises: the kept KV goes with the store's context, not with the exception (whose
    traceback still holds the store)."""
    from baer_fast.runtime.prefill import PrefixEngine
    from tests.fixtures.tiny_models import make_pairs
    pairs, engine = make_pairs(2, seed=8), PrefixEngine(loaded)
    with pytest.raises(RuntimeError):
        with prefix_store.keeping(engine) as store:
            _stage_one(engine, loaded, pairs, 2)
            assert store.kv
            raise RuntimeError("stage 2 failed")
    assert store.kv == {} and engine.prefix_store is None and engine.held_outside == 0


def test_parts_hold_together_within_the_budget(loaded):
    """PrefixStore.parts cuts the pairs into runs whose distinct prefixes fit the budget, a question's
    pairs together; a duplicate content adds nothing, a pair too long for the budget is a run of its own."""
    import dataclasses

    from baer_fast.runtime.prefill import PrefixEngine
    from tests.fixtures.tiny_models import make_pairs
    p = make_pairs(4, seed=8)
    a, c = p[0], p[2]
    b, d = (dataclasses.replace(x, question=a.question) for x in (p[1], p[3]))
    engine = PrefixEngine(loaded)
    with prefix_store.keeping(engine) as store:
        size = {x.id: sum(len(q) for q in ps) * store._per_token
                for x, ps in zip([a, b, c, d], store._mine([a, b, c, d]))}
        store.budget = size[a.id] + size[b.id] + size[d.id]
        got = store.parts([a, c, b, d])
        assert sorted(map(sorted, got)) == [[0, 2, 3], [1]]             # a's question's pairs run together
        store.budget = size[a.id]
        assert store.parts([a, a]) == [[0, 1]]                         # the same content holds no more
        store.budget = min(size.values()) - 1
        assert sorted(store.parts([a, c, b, d])) == [[0], [1], [2], [3]]


def _room(store, pairs, n: int) -> int:
    return sum(len(q) for ps in store._mine(pairs[:n]) for q in ps) * store._per_token


def test_pairs_beyond_the_budget_run_in_parts_and_read_every_open_prefix(qwen_dir, monkeypatch):
    """With room for four pairs' prefixes, the 12 pairs run both stages in parts: stage 2 reads every
    open pair's prefixes from stage 1 (the same calls keeping nothing prefill exactly those tokens
    more), where one part would drop most of them for want of room and prefill them again."""
    from tests.bank.test_cascade_reuse import _pair_calls
    from tests.fixtures.checks import max_run_diff
    from tests.fixtures.tolerances import naive_run_error, paths_tol
    art, real = _art(qwen_dir, ["direct", "score", "pride"], ["direct"]), prefix_store.keeping
    calls = _pair_calls(monkeypatch)

    def judged(keep: bool = True, parts: bool = True):
        @contextlib.contextmanager
        def small(engine):
            with real(engine) as store:
                store.budget = store.left = _room(store, PAIRS, 4)
                if not keep:
                    store.wanted = lambda pairs: [[] for _ in pairs]
                if not parts:
                    store.parts = lambda pairs: [list(range(len(pairs)))]
                yield store
        monkeypatch.setattr(prefix_store, "keeping", small)
        calls.clear()
        j, recs = _judge(qwen_dir, art)
        return j, recs, [([p.id for p in ps], names, n) for ps, names, n in calls]   # Judge names pair i judge-i

    j, recs, kept = judged()
    _, plain, again = judged(keep=False)
    _, _, one = judged(parts=False)
    assert [c[:2] for c in kept] == [c[:2] for c in again]
    first, second = [c for c in kept if c[1] == ["direct"]], [c for c in kept if c[1] == ["score"]]
    assert len(first) > 1 and sorted(i for c in first for i in c[0]) == sorted(f"judge-{i}" for i in range(12))
    by_id = {f"judge-{i}": p for i, p in enumerate(PAIRS)}
    for (ids, names, k), (_, _, a) in zip(kept, again):
        if names == ["score"]:                                                              # each open prefix read
            assert a - k == _prefix_tokens(j.engine.loaded, [by_id[i] for i in ids]) > 0
    assert len(one) == 2 and one[1][2] > sum(c[2] for c in second)                      # one part saves less
    open_ = [i for i, r in enumerate(recs) if "score" in r.experts]
    assert sorted(i for c in second for i in c[0]) == sorted(f"judge-{i}" for i in open_)
    tol = paths_tol(naive_run_error(j.engine.loaded, PAIRS, ["direct", "score"]))
    assert max_run_diff([recs[i] for i in open_], [plain[i] for i in open_], ["direct", "score", "pride"]) <= tol
    assert j.engine.prefix_store is None and j.engine.held_outside == 0


def test_parts_do_not_depend_on_the_batch_order_or_orientation(qwen_dir, monkeypatch):
    """Cut in content order: the batch reversed, or swapped, runs the same parts, so its scores are the
    same bits, reordered (negated when swapped), as with one part."""
    from baer_fast.api import Judge, JudgeOptions
    from baer_fast.runtime.open import open_engine
    real = prefix_store.keeping

    @contextlib.contextmanager
    def small(engine):
        with real(engine) as store:
            store.budget = store.left = _room(store, PAIRS, 4)
            yield store
    monkeypatch.setattr(prefix_store, "keeping", small)
    j = Judge(open_engine(qwen_dir), _art(qwen_dir, ["direct", "score", "pride"], ["direct"]),
              options=JudgeOptions(batch_invariant=False))
    q, a, b = [p.question for p in PAIRS], [p.response_a for p in PAIRS], [p.response_b for p in PAIRS]
    s = j.score(q, a, b)
    assert (j.score(q[::-1], a[::-1], b[::-1]).flip(0) == s).all()
    assert (j.score(q, b, a) == -s).all() and 0 < int((s != 0).sum())


def test_worth_keeping_only_where_stage_two_reads_it():
    assert prefix_store.worth_keeping(["direct"], ["score"])
    assert not prefix_store.worth_keeping(["direct"], [])                      # pride from direct: no prompts
    assert not prefix_store.worth_keeping(["direct"], ["cot"])                 # the decoder takes no prefix KV
    assert not prefix_store.worth_keeping(["cot", "cot_native"], ["direct"])   # nor keeps any


@pytest.mark.parametrize("full, stage1", [(["direct", "cot"], ["direct"]), (["cot", "direct"], ["cot_native"])])
def test_a_generative_stage_keeps_no_prefix(qwen_dir, monkeypatch, full, stage1):
    """A stage with a generative expert runs through the decoder, which neither keeps nor takes prefix
    KV: no store is held (nor are the pairs cut into parts for it)."""
    from baer_fast.api import Judge, JudgeOptions
    from baer_fast.bank.generative import GenerationConfig
    from baer_fast.runtime.open import open_engine
    gen = GenerationConfig(max_new_tokens={"cot": 6})
    art = _art(qwen_dir, full, stage1, gen)

    def refuse(engine):
        raise AssertionError("keeping used with a generative stage")
    monkeypatch.setattr(prefix_store, "keeping", refuse)
    j = Judge(open_engine(qwen_dir), art, options=JudgeOptions(batch_invariant=False, generation=gen))
    recs = j.signals([p.question for p in PAIRS], [p.response_a for p in PAIRS], [p.response_b for p in PAIRS])
    assert len(recs) == 12 and 0 < j.last_cascade["exited"] < 12
