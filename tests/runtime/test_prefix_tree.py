from hypothesis import given, settings
from hypothesis import strategies as st

from baer_fast.runtime.plan.prefix_tree import ancestors, build_tree, subtree, tree_tokens


def _distinct_prefixes(seqs) -> int:
    # independent count: each distinct non-empty prefix is exactly one prefilled token
    return len({tuple(s[:k]) for s in seqs for k in range(1, len(s) + 1)})


def _path(nodes, i):
    out = []
    while i >= 0:
        out = list(nodes[i].tokens) + out
        i = nodes[i].parent
    return out


def test_small_tree_exact():
    seqs = [(1, 2, 3, 4), (1, 2, 3, 5, 6), (1, 2, 3), (7, 8), (1, 2, 3, 4)]
    nodes = build_tree(seqs)
    assert [n.tokens for n in nodes] == [(1, 2, 3), (4,), (5, 6), (7, 8)]
    assert [n.ends for n in nodes] == [[2], [0, 4], [1], [3]]
    assert tree_tokens(nodes) == 8
    assert [ancestors(nodes, i) for i in range(4)] == [[], [0], [0], []]
    assert [subtree(nodes, i) for i in range(4)] == [[0, 1, 2], [1], [2], [3]]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 3), min_size=1, max_size=12), min_size=1, max_size=10))
def test_tree_spells_every_sequence_once(seqs):
    seqs = [tuple(s) for s in seqs]
    nodes = build_tree(seqs)
    assert tree_tokens(nodes) == _distinct_prefixes(seqs)
    ends = sorted(q for n in nodes for q in n.ends)
    assert ends == list(range(len(seqs)))
    for i, n in enumerate(nodes):
        assert n.tokens and n.past == len(_path(nodes, i)) - len(n.tokens)
        for q in n.ends:
            assert tuple(_path(nodes, i)) == seqs[q]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 2), min_size=1, max_size=300),
       st.lists(st.tuples(st.integers(0, 300), st.lists(st.integers(0, 2), max_size=40)), min_size=1, max_size=8))
def test_long_shared_prefixes_split_at_the_first_difference(stem, cuts):
    """Long runs in common (the binary search over slices), cut anywhere, with short tails."""
    seqs = [tuple(stem[:k]) + tuple(tail) or (0,) for k, tail in cuts]
    nodes = build_tree(seqs)
    assert tree_tokens(nodes) == _distinct_prefixes(seqs)
    for i, n in enumerate(nodes):
        kids = [nodes[c].tokens[0] for c in n.children]
        assert len(kids) == len(set(kids))                    # siblings start with different tokens
        assert len(n.children) != 1 or n.ends                 # a pass-through node would be merged
        for q in n.ends:
            assert tuple(_path(nodes, i)) == seqs[q]
