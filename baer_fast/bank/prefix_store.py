"""Prompt-prefix KV kept between engine calls on the same pairs: a cascade's two stages.

Every pairwise prompt of one display order starts with the same [template][system][question]
[A][B] (generative.pairwise_prefixes). A cascade runs stage 1's experts on every pair, then stage
2's on the pairs stage 1 leaves open. `keeping(engine)` lends the prefix engine a
PrefixStore for both: stage 1's single-pass engine calls hand back each pair's two prefixes' KV
(PrefixEngine.run(keep=...)) within the store's budget (half the engine's KV budget; the
engine's waves plan within what the store leaves), `only(open pairs)` frees the rest, and stage
2's calls take it as handed-in prefix KV (run(given=...)), so an open pair's prefix is prefilled
once. Pairs whose prefixes exceed the budget together run both stages in parts (`parts`). Not
used where a stage has generative experts (the decoder prefills their prompts), on the naive or
vLLM engines (vLLM caches prefixes itself), or for batch-invariant runs (a handed-in prefix's
last bits are those of another call's shapes).
"""
from __future__ import annotations

from contextlib import contextmanager

from baer_fast.bank.canonical import content_key


class PrefixStore:
    def __init__(self, engine, budget: int):
        self.engine, self.left, self.budget = engine, budget, budget
        self._per_token = engine.loaded.kv_bytes_per_token
        self._of: dict = {}                # content key -> its two prefixes (tokenized when first asked)
        self.kv: dict = {}                 # prefix ids -> (K, V) [layers, kvh, len, hd]
        self._asked: dict = {}             # prefix ids -> bytes set aside for the call in flight
        self.last = False                  # only() named the last stage's pairs: nothing is kept after

    def _mine(self, pairs) -> list[list[tuple]]:
        from baer_fast.bank.generative import pairwise_prefixes
        from baer_fast.bank.prompting import PromptEncoder
        keys = [content_key(p) for p in pairs]
        new = {k: p for k, p in zip(keys, pairs) if k not in self._of}
        if new:
            self._of.update(zip(new, pairwise_prefixes(PromptEncoder.of(self.engine.loaded), list(new.values()))))
        return [self._of[k] for k in keys]

    def given(self, pairs) -> list[list[tuple]]:
        """Per pair, (prefix ids, K, V) of its prefixes held here (PrefixEngine.run's given)."""
        return [[(q, *self.kv[q]) for q in ps if q in self.kv] for ps in self._mine(pairs)]

    def wanted(self, pairs) -> list[list[tuple]]:
        """Per pair, its prefixes not held yet that the budget has room for (run's keep); their bytes
        are set aside until `add`."""
        if self.last:                      # no later call reads what this one would keep
            return [[] for _ in pairs]
        out = []
        for ps in self._mine(pairs):
            mine = []
            for q in ps:
                need = len(q) * self._per_token
                if q not in self.kv and q not in self._asked and need <= self.left:
                    self._asked[q], self.left = need, self.left - need
                    mine.append(q)
            out.append(mine)
        return out

    def add(self, kept: dict) -> None:
        """An engine call's `kept`: what it handed back is held; what it did not (no query extended
        it) gives its bytes back."""
        for q, need in self._asked.items():
            if q in kept:
                self.kv[q] = kept[q]
            else:
                self.left += need
        self._asked = {}
        self._sync()

    def only(self, pairs) -> None:
        """Hold the prefixes of these pairs only (a cascade's open pairs), and keep no more: their
        stage is the last."""
        mine = {q for ps in self._mine(pairs) for q in ps} if self.kv else set()
        for q in [q for q in self.kv if q not in mine]:
            del self.kv[q]
            self.left += len(q) * self._per_token
        self.last = True
        self._sync()

    def parts(self, pairs) -> list[list[int]]:
        """Indices of `pairs` cut into runs whose distinct prefixes the store holds together, a
        question's pairs kept in one run where they fit (the engine prefills a question once per
        call: bank/queries.share_questions); a pair that does not fit alone is a run of its own.
        Cut in content order, so the batch's order, ids and orientations do not move the cuts. A
        cascade runs both stages per run."""
        mine, by_question, keys = self._mine(pairs), {}, [content_key(p) for p in pairs]
        for i in sorted(range(len(pairs)), key=keys.__getitem__):      # content order: positions change nothing
            by_question.setdefault(pairs[i].question, []).append(i)
        out, seen, room = [[]], set(), self.budget

        def need(qs) -> int:
            return sum(len(q) for q in set(qs) - seen) * self._per_token
        for group in by_question.values():
            if out[-1] and room < need([q for i in group for q in mine[i]]) <= self.budget:
                out, seen, room = out + [[]], set(), self.budget        # the question's pairs in a run of their own
            for i in group:
                if out[-1] and need(mine[i]) > room:
                    out, seen, room = out + [[]], set(), self.budget
                room -= need(mine[i])
                out[-1].append(i)
                seen.update(mine[i])
        return out

    def reset(self) -> None:
        """Hold nothing and keep again, within the whole budget (a cascade's next run of pairs)."""
        self.kv.clear()
        self._asked, self.left, self.last = {}, self.budget, False
        self._sync()

    def tokens(self) -> int:
        return sum(len(q) for q in self.kv)

    def _sync(self) -> None:
        self.engine.held_outside = self.tokens() * self._per_token


def worth_keeping(first, second) -> bool:
    """Whether a cascade's stage 2 reads what stage 1 would keep: neither stage has a generative
    expert (the decoder neither keeps nor takes prefix KV), and stage 2 computes prompts of its own
    (`second`: its experts less those derived from stage 1's runs)."""
    from baer_fast import protocols
    gen = set(protocols.GENERATIVE) | set(protocols.NATIVE)
    return not gen & (set(first) | set(second)) and bool(protocols.prompt_experts_for(list(second)))


@contextmanager
def keeping(engine):
    """A PrefixStore lent to `engine` for the calls inside (None where the engine takes no prefix KV)."""
    if not (engine.takes_prefix_kv and engine.shares_prefixes):
        yield None
        return
    store = PrefixStore(engine, engine.config.kv_budget_bytes // 2)
    engine.prefix_store = store
    try:
        yield store
    finally:                 # an exception's traceback still holds the store: its KV goes now
        store.kv.clear()
        engine.prefix_store, engine.held_outside = None, 0
