"""Pruning per pair subset (`fit --budget B --per-subset`, docs/cost.md): one expert set per subset.

A unit of the budget search is a move (subset g, expert e): run e on the pairs of g. An allocation
costs sum_g share_g * cost_g(its experts of g), share_g and cost_g measured on g's non-test rows, so
the budget holds on average over the pairs. An expert not run on a pair gives it no evidence
(z = zt = 0; heads/allocation.py), the search ranks allocations by the stack's out-of-fold
log-loss as `budget.search` ranks subsets, and with one subset it is that search exactly.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from baer_fast.features.evidence import stack_features
from baer_fast.heads.allocation import experts_for
from baer_fast.selection.budget import ExpertSpace, SubsetCV
from baer_fast.selection.costs import CostModel, mean_cost, shared_costs, subset_cost


class AllocationCV(SubsetCV):
    """SubsetCV whose keys are moves: the stack on all experts, each masked to the subsets that run it."""

    def __init__(self, rows, y, experts, categories, *, groups: Sequence[str], **kw):
        super().__init__(rows, y, experts, categories, **kw)
        self.groups = list(groups)
        self.full = tuple((g, e) for g in self.groups for e in sorted(experts))
        self.where = {g: i for i, g in enumerate(self.groups)}
        self.row_group = np.array([self.where.get(g, -1) for g in self.subsets])

    def phi(self, moves) -> np.ndarray:
        on = np.zeros((len(self.groups) + 1, len(self.index)))      # the last row: a subset no move names
        for g, e in moves:
            on[self.where[g], self.index[e]] = 1.0
        mask = on[self.row_group]
        return stack_features(self.z * mask, self.zt * mask, self.subsets, self.categories)


class AllocationSpace:
    """`budget.ExpertSpace`'s interface over moves; labels read "expert@subset". Subsets x experts moves are
    too many for a full greedy step each (O(moves^2) fits per pass), so the search takes its steps lazily."""

    lazy = True

    def __init__(self, rows, experts, costs: dict, sources: dict | None, costs_override, model: CostModel):
        self.groups = sorted({r.subset for r in rows})
        self.sources, self.share, self.costs, self.shared = sources, {}, {}, {}
        for g in self.groups:
            in_g = [r for r in rows if r.subset == g]
            self.share[g] = len(in_g) / len(rows)
            self.costs[g] = {e: group_cost(in_g, e, costs, costs_override or {}, model) for e in experts}
            self.shared[g] = None if costs_override else shared_costs(in_g)
        self.units = [(g, e) for g in self.groups for e in sorted(experts)]
        self.unit_of = {self.label(u): u for u in self.units}

    def cost(self, units) -> float:
        by = self.by_group(units)
        return float(sum(self.share[g] * self.group_cost(g, by[g]) for g in self.groups))

    def group_cost(self, g, experts) -> float:
        return subset_cost(self.costs[g], experts, self.sources, self.shared[g])

    def own(self, unit) -> float:
        return self.share[unit[0]] * self.costs[unit[0]][unit[1]]

    def label(self, unit) -> str:
        return f"{unit[1]}@{unit[0]}"

    def units_of(self, labels) -> list:
        return [self.unit_of[x] for x in labels]

    def by_group(self, units) -> dict:
        out = {g: [] for g in self.groups}
        for g, e in units:
            out[g].append(e)
        return {g: sorted(es) for g, es in out.items()}

    def cv(self, rows, y, experts, categories, **kw) -> AllocationCV:
        return AllocationCV(rows, y, experts, categories, groups=self.groups, **kw)

    def describe(self, units) -> dict:
        by = self.by_group(units)
        return {"experts": sorted({e for es in by.values() for e in es}), "allocation": by,
                "moves": [self.label(u) for u in sorted(units)],
                "subset_shares": dict(self.share),
                "subset_costs": {g: self.group_cost(g, by[g]) for g in self.groups}}


def group_cost(rows: Sequence, expert: str, bank: dict, override: dict, model: CostModel) -> float:
    """An expert's mean cost per pair on one subset's rows: the override, else what they record, else the bank's."""
    if expert in override:
        return float(override[expert])
    measured = mean_cost(rows, expert, model)
    return float(bank[expert]) if measured is None else measured


class OneSubsetSpace(ExpertSpace):
    """Rows of one subset: the plain search (bit for bit), its subset recorded as the allocation."""

    def __init__(self, costs: dict, sources: dict | None, subset: str):
        super().__init__(costs, sources)
        self.subset = subset

    def describe(self, units) -> dict:
        return {"experts": list(units), "allocation": {self.subset: sorted(units)}, "subset_shares": {self.subset: 1.0}}


def space_for(rows, experts, costs, sources, costs_override, model):
    """`budget.plan_with_nested`'s space_for: moves when the rows hold several subsets, else plain experts."""
    groups = {r.subset for r in rows}
    if len(groups) == 1:
        return OneSubsetSpace(costs, sources, groups.pop())
    return AllocationSpace(rows, experts, costs, sources, costs_override, model)


def unpruned_note(art: dict, pairs: Sequence) -> str | None:
    """One line when some pairs are of subsets the head was not pruned for (they run every expert it
    chose), else None."""
    alloc = art["allocation"]
    unseen = sorted({p.subset for p in pairs} - set(alloc))
    if not unseen:
        return None
    n = sum(p.subset not in alloc for p in pairs)
    return (f"the head was pruned per subset ({', '.join(alloc)}); {n} of {len(pairs)} pairs are of subset "
            f"{', '.join(map(repr, unseen))} and run every expert it chose ({', '.join(art['experts'])})")


def run_allocated(art: dict, pairs: Sequence, run: Callable) -> list:
    """run(pairs, experts, index) -> Signals per pair: each group of pairs whose subsets run the same experts
    in one call (index: the group's place in a fixed order, for file names), the records in pair order."""
    union = list(art["experts"])
    groups: dict[tuple, list[int]] = {}
    for i, p in enumerate(pairs):
        groups.setdefault(tuple(experts_for(art["allocation"], union, p.subset)), []).append(i)
    out: list = [None] * len(pairs)
    for k, names in enumerate(sorted(groups)):
        todo = groups[names]
        for i, rec in zip(todo, run([pairs[i] for i in todo], list(names), k)):
            out[i] = rec
    return out
