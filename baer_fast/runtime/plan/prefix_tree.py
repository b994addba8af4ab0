"""Radix tree over token sequences: the prefix-sharing plan for one group of prompts.

Built on the token ids themselves, so sharing can never change what a prompt's ids are:
every root-to-node path spells exactly the tokens of the prompts passing through it. Each
node holds a non-empty token run; a prompt ends at the last token of exactly one node.
Pure Python; knows nothing about models or text.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Node:
    tokens: tuple[int, ...]       # this node's own run of token ids (non-empty)
    parent: int                   # index of the parent node, -1 for a root
    depth: int                    # 0 for roots
    past: int                     # tokens on the path above this node
    ends: list[int] = field(default_factory=list)      # sequences whose last token is this node's last
    children: list[int] = field(default_factory=list)


def build_tree(seqs: list[tuple[int, ...]]) -> list[Node]:
    """Radix tree (a forest if first tokens differ) over `seqs`; nodes in depth-first order."""
    if any(len(s) == 0 for s in seqs):
        raise ValueError("empty token sequence")
    nodes: list[Node] = []
    for group in _split_by_token(range(len(seqs)), seqs, 0):
        _grow(nodes, seqs, group, start=0, parent=-1, depth=0)
    return nodes


def _split_by_token(idx, seqs, pos) -> list[list[int]]:
    groups: dict[int, list[int]] = {}
    for i in idx:
        groups.setdefault(seqs[i][pos], []).append(i)
    return list(groups.values())


def _grow(nodes, seqs, group, *, start, parent, depth) -> None:
    end = _common_end(seqs, group, start)
    me = len(nodes)
    nodes.append(Node(tuple(seqs[group[0]][start:end]), parent, depth, start))
    if parent >= 0:
        nodes[parent].children.append(me)
    nodes[me].ends = [i for i in group if len(seqs[i]) == end]
    rest = [i for i in group if len(seqs[i]) > end]
    for sub in _split_by_token(rest, seqs, end):
        _grow(nodes, seqs, sub, start=end, parent=me, depth=depth + 1)


def _common_end(seqs, group, start) -> int:
    """First position >= start+1 where the group diverges or one of its sequences ends (the
    group agrees up to and including `start`)."""
    first = seqs[group[0]]
    end = min(len(seqs[i]) for i in group)
    for i in group[1:]:
        end = _agree_until(first, seqs[i], start + 1, end)
    return end


def _agree_until(a, b, lo: int, hi: int) -> int:
    """Given a[:lo] == b[:lo], the largest m <= hi with a[:m] == b[:m]: a binary search over
    slice comparisons, which run in C (a Python loop per token was most of a tree's build)."""
    while lo < hi:
        if a[lo:hi] == b[lo:hi]:
            return hi
        mid = (lo + hi + 1) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def common_prefix(a, b) -> int:
    """Length of the longest common prefix of token sequences a and b."""
    return _agree_until(a, b, 0, min(len(a), len(b)))


def tree_tokens(nodes: list[Node]) -> int:
    """Tokens prefilled when every node is computed exactly once."""
    return sum(len(n.tokens) for n in nodes)


def causal_scores(n: int, past: int = 0) -> int:
    """Attention scores n tokens after `past` need when each sees exactly its prefix, itself included."""
    return n * past + n * (n + 1) // 2


def tree_scores(nodes: list[Node]) -> int:
    """Attention scores (per layer and head) when every node's tokens see exactly their prefix:
    the least any exact prefix-sharing engine computes for this tree."""
    return sum(causal_scores(len(n.tokens), n.past) for n in nodes)


def ancestors(nodes: list[Node], i: int) -> list[int]:
    """Indices of node i's ancestors, root first (the nodes whose tokens are i's past)."""
    chain, p = [], nodes[i].parent
    while p >= 0:
        chain.append(p)
        p = nodes[p].parent
    return chain[::-1]


def subtree(nodes: list[Node], i: int) -> list[int]:
    """Node i and its descendants, depth-first (each after its parent; a subtree is contiguous)."""
    out, stack = [], [i]
    while stack:
        j = stack.pop()
        out.append(j)
        stack.extend(reversed(nodes[j].children))
    return out
