"""Pair and signals records: the two interchange formats every stage reads.

pairs:   {"id", "question", "response_a", "response_b", "label"?, "subset"?, "category"?, "split"?, "meta"?}
signals: {"id", "subset", "category"?, "label"?, "split"?, "meta", "experts": {name: [u_1, ..., u_M]}}
`subset` and the optional `category` (a task type) each give interaction blocks (Eq. 5).

`question`: a string, or a conversation ([{role: user|assistant, content}], alternating, ending
with the user turn the responses answer; in memory a tuple of (role, content) tuples).
`u` = P(response a is better), canonical frame; `null` = missing run. `label`: "a", "b" or
"tie" (ties are kept but excluded from fitting and accuracy).

Readers take `rejects=` (`io/rejects.py`): without it the first bad record raises an
`InputError` naming file, line and field; with it bad records are skipped and kept there.
Each record remembers its source line (`.line`, 0 when built in memory).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, Iterator

from baer_fast.errors import InputError
from baer_fast.io.jsonl import is_finite_number, iter_jsonl_raw, write_jsonl
from baer_fast.io.text_stats import STAT_NAMES

if TYPE_CHECKING:
    from baer_fast.io.rejects import Rejects

LABELS = ("a", "b", "tie")
SPLITS = ("selection", "calibration", "test")


@dataclass(frozen=True)
class Pair:
    id: str
    question: str
    response_a: str
    response_b: str
    label: str | None = None    # "a" | "b" | "tie" | None (unlabelled)
    subset: str = "default"     # category g(x) used by the stack's interaction block
    split: str | None = None    # explicit role; wins over the id hash
    meta: dict = field(default_factory=dict)
    category: str | None = None  # optional task-type group g(x), a second interaction block
    line: int = field(default=0, compare=False, repr=False)   # source line; not part of the format

    def __post_init__(self):
        if not isinstance(self.question, str):
            object.__setattr__(self, "question", as_conversation(self.question))

    def swapped(self) -> "Pair":
        """Tx: the same pair with the candidates exchanged (label follows its response)."""
        label = {"a": "b", "b": "a"}.get(self.label, self.label)
        return Pair(self.id, self.question, self.response_b, self.response_a, label,
                    self.subset, self.split, swap_meta(self.meta), self.category)

    def to_json(self) -> dict:
        question = self.question if isinstance(self.question, str) else \
            [{"role": r, "content": c} for r, c in self.question]
        out = {"id": self.id, "question": question, "response_a": self.response_a,
               "response_b": self.response_b}
        if self.label is not None:
            out["label"] = self.label
        out["subset"] = self.subset
        if self.category is not None:
            out["category"] = self.category
        if self.split is not None:
            out["split"] = self.split
        if self.meta:
            out["meta"] = self.meta
        return out


def per_pair(value, n: int, name: str, default) -> list:
    """A pair field given in memory (Judge, client): one string for every pair, or a sequence of n
    (None entries take `default`), as a list of n; anything else is an InputError naming `name`."""
    if value is None or isinstance(value, str):
        value = [value] * n
    elif not hasattr(value, "__len__"):
        raise InputError(f"expected a string or a sequence of strings, got {type(value).__name__}", field=name)
    elif len(value) != n:
        raise InputError(f"{len(value)} values for {n} pairs (give one string, or one per pair)", field=name)
    out = []
    for i, v in enumerate(value):
        if v is not None and (not isinstance(v, str) or not v):
            raise InputError(f"entry {i}: expected a non-empty string or None, got {v!r}", field=name)
        out.append(default if v is None else v)
    return out


@dataclass(frozen=True)
class Signals:
    id: str
    experts: dict            # name -> list[float | None], canonical frame
    subset: str = "default"
    label: str | None = None
    split: str | None = None
    meta: dict = field(default_factory=dict)
    category: str | None = None  # optional task-type group, as in Pair
    line: int = field(default=0, compare=False, repr=False)   # source line; not part of the format

    def swapped(self) -> "Signals":
        """Tx: u -> 1-u; runs of the two display orders exchange places (pairs of runs)."""
        experts = {k: _swap_runs(v) for k, v in self.experts.items()}
        label = {"a": "b", "b": "a"}.get(self.label, self.label)
        return Signals(self.id, experts, self.subset, label, self.split, swap_meta(self.meta), self.category)

    def to_json(self) -> dict:
        out = {"id": self.id, "subset": self.subset}
        if self.category is not None:
            out["category"] = self.category
        if self.label is not None:
            out["label"] = self.label
        if self.split is not None:
            out["split"] = self.split
        out["meta"] = self.meta
        out["experts"] = self.experts
        return out


def swap_runs(runs: list) -> list:
    """Tx on one expert's runs (Signals.swapped). An exact involution on runs snapped by
    protocols.base.snap (multiples of 2^-53, so 1 - u is exact)."""
    # Runs are stored as consecutive (order ab, order ba) pairs where there are two
    # orders; exchanging candidates turns each ab-run into the other's ba-run.
    flipped = [None if u is None else 1.0 - u for u in runs]
    if len(flipped) % 2:
        return flipped
    out = []
    for i in range(0, len(flipped), 2):
        out += [flipped[i + 1], flipped[i]]
    return out


_swap_runs = swap_runs


def swap_meta(meta: dict) -> dict:
    """Exchange every `*_a`/`*_b` key of the pair metadata."""
    out = {}
    for k, v in meta.items():
        if k.endswith("_a"):
            out[k[:-2] + "_b"] = v
        elif k.endswith("_b"):
            out[k[:-2] + "_a"] = v
        else:
            out[k] = v
    return out


# ---------------------------------------------------------------- validation

def _need(obj: dict, name: str, types, *, path: str, line: int, allow_empty: bool = True):
    if name not in obj:
        raise InputError("missing required field", path=path, line=line, field=name)
    val = obj[name]
    if not isinstance(val, types) or isinstance(val, bool):
        want = types.__name__ if isinstance(types, type) else "/".join(t.__name__ for t in types)
        raise InputError(f"expected {want}, got {type(val).__name__}", path=path, line=line, field=name)
    if not allow_empty and isinstance(val, str) and not val.strip():
        raise InputError("must not be empty", path=path, line=line, field=name)
    return val


def _opt_choice(obj: dict, name: str, choices, *, path: str, line: int):
    val = obj.get(name)
    if val is None:
        return None
    if val not in choices:
        raise InputError(f"{val!r} is not one of {', '.join(map(repr, choices))}",
                         path=path, line=line, field=name)
    return val


def _opt_str(obj: dict, name: str, default, *, path: str, line: int):
    val = obj.get(name, default)
    if val is None:
        return default
    if not isinstance(val, str) or not val:
        raise InputError("expected a non-empty string", path=path, line=line, field=name)
    return val


def _opt_dict(obj: dict, name: str, *, path: str, line: int) -> dict:
    val = obj.get(name, {})
    if val is None:
        return {}
    if not isinstance(val, dict):
        raise InputError(f"expected an object, got {type(val).__name__}", path=path, line=line, field=name)
    return val


_META_COUNTS = ("len_q",) + tuple(f"{s}_{side}" for s in STAT_NAMES for side in "ab")


def _count(v) -> bool:
    """A non-negative finite number (JSON's int and float first: this runs for every meta count)."""
    t = type(v)
    if t is int:
        return v >= 0
    if t is float:
        return 0.0 <= v < math.inf          # NaN fails both comparisons
    return is_finite_number(v) and v >= 0


def _meta(obj: dict, *, path: str, line: int) -> dict:
    """`meta`, with the keys the library reads checked: the pair statistics (non-negative numbers or
    null), `condition` and `split_group` (strings; an integer group is kept as its digits),
    `truncated` (bool), `expert_cost` ({expert: {prefilled, decoded, seconds, shared: numbers, from: str}})
    and `prefill_shared` ([[tokens, [expert, ...]], ...]).
    Runs on every record read, so the checks are plain tests, not closures."""
    meta = _opt_dict(obj, "meta", path=path, line=line)
    bad = None
    for k in _META_COUNTS:
        v = meta.get(k)
        if v is not None and not (type(v) is int and v >= 0) and not _count(v):    # ints first: the usual
            bad = bad or (k, v, "a non-negative number")
    group = meta.get("split_group")
    if type(group) is int:
        meta = {**meta, "split_group": str(group)}
    for k in ("condition", "split_group"):
        v = meta.get(k)
        if v is not None and not isinstance(v, str):
            bad = bad or (k, v, "a string")
    v = meta.get("truncated")
    if v is not None and not isinstance(v, bool):
        bad = bad or ("truncated", v, "true or false")
    costs = meta.get("expert_cost")
    if costs is not None and not isinstance(costs, dict):
        bad = bad or ("expert_cost", costs, "an object {expert: {prefilled, decoded}}")
    for e, c in (costs.items() if isinstance(costs, dict) else ()):
        if c is not None and not isinstance(c, dict):
            bad = bad or (f"expert_cost.{e}", c, "an object {prefilled, decoded}")
            continue
        for k, v in (c or {}).items():
            if type(v) is int and v >= 0 and k != "from":       # token counts: the usual case, first
                continue
            if v is not None and not (isinstance(v, str) if k == "from" else _count(v)):
                bad = bad or (f"expert_cost.{e}.{k}", v, "an expert's name" if k == "from" else "a non-negative number")
    shared = meta.get("prefill_shared")
    if shared is not None and not (isinstance(shared, list) and all(
            isinstance(x, list) and len(x) == 2 and _count(x[0]) and isinstance(x[1], list) and x[1]
            and all(isinstance(e, str) for e in x[1]) for x in shared)):
        bad = bad or ("prefill_shared", shared, "a list of [tokens, [expert, ...]]")
    if bad:
        raise InputError(f"expected {bad[2]}, got {bad[1]!r}", path=path, line=line, field=f"meta.{bad[0]}")
    return meta


PAIR_FIELDS = {"id", "question", "response_a", "response_b", "label", "subset", "category", "split", "meta"}
SIGNAL_FIELDS = {"id", "subset", "category", "label", "split", "meta", "experts"}
ROLES = ("user", "assistant")


def as_conversation(messages) -> tuple:
    """A conversation as a tuple of (role, content) tuples; ValueError naming the first bad turn.

    Accepts {"role", "content"} mappings or (role, content) pairs. Turns alternate, opening and
    ending with a user turn (the responses are the next assistant turn)."""
    if isinstance(messages, (str, bytes)) or not hasattr(messages, "__iter__"):
        raise ValueError("expected a string or a list of {role, content} messages")
    out = []
    for i, m in enumerate(messages):
        role, content = (m.get("role"), m.get("content")) if isinstance(m, dict) else tuple(m)
        want = ROLES[i % 2]
        if role not in ROLES:
            raise ValueError(f"message {i}: role {role!r} is not one of 'user', 'assistant'")
        if role != want:
            raise ValueError(f"message {i}: expected a {want!r} turn (turns alternate, the first is 'user')")
        if not isinstance(content, str):
            raise ValueError(f"message {i}: content must be a string, got {type(content).__name__}")
        out.append((role, content))
    if not out or out[-1][0] != "user":
        raise ValueError("a conversation must end with the user turn the two responses answer")
    return tuple(out)


def _question(obj: dict, *, path: str, line: int):
    if isinstance(obj.get("question"), list):
        try:
            return as_conversation(obj["question"])
        except (ValueError, TypeError, AttributeError) as e:
            raise InputError(str(e), path=path, line=line, field="question") from None
    return _need(obj, "question", str, path=path, line=line)


def _check_extra(obj: dict, allowed: set, *, path: str, line: int):
    extra = sorted(set(obj) - allowed)
    if extra:
        raise InputError(f"unknown field (allowed: {', '.join(sorted(allowed))})",
                         path=path, line=line, field=extra[0])


def pair_from_json(obj: dict, *, path: str = "<pairs>", line: int = 0) -> Pair:
    _check_extra(obj, PAIR_FIELDS, path=path, line=line)
    pid = _need(obj, "id", str, path=path, line=line, allow_empty=False)
    question = _question(obj, path=path, line=line)
    ra = _need(obj, "response_a", str, path=path, line=line)
    rb = _need(obj, "response_b", str, path=path, line=line)
    return Pair(pid, question, ra, rb,
                label=_opt_choice(obj, "label", LABELS, path=path, line=line),
                subset=_opt_str(obj, "subset", "default", path=path, line=line),
                split=_opt_choice(obj, "split", SPLITS, path=path, line=line),
                meta=_meta(obj, path=path, line=line),
                category=_opt_str(obj, "category", None, path=path, line=line), line=line)


def signals_from_json(obj: dict, *, path: str = "<signals>", line: int = 0, meta_keys=None) -> Signals:
    """meta_keys (a set): keep only these keys of `meta`, once every key is checked."""
    _check_extra(obj, SIGNAL_FIELDS, path=path, line=line)
    sid = _need(obj, "id", str, path=path, line=line, allow_empty=False)
    experts = _need(obj, "experts", dict, path=path, line=line)
    for name, runs in experts.items():
        _check_runs(name, runs, path=path, line=line)
    return Signals(sid, experts,
                   subset=_opt_str(obj, "subset", "default", path=path, line=line),
                   label=_opt_choice(obj, "label", LABELS, path=path, line=line),
                   split=_opt_choice(obj, "split", SPLITS, path=path, line=line),
                   meta=_meta(obj, path=path, line=line) if meta_keys is None else
                   {k: v for k, v in _meta(obj, path=path, line=line).items() if k in meta_keys},
                   category=_opt_str(obj, "category", None, path=path, line=line), line=line)


def _check_runs(name: str, runs, *, path: str, line: int) -> None:
    fld = f"experts.{name}"
    if not isinstance(runs, list) or not runs:
        raise InputError("expected a non-empty list of probabilities (null = missing run)",
                         path=path, line=line, field=fld)
    for m, u in enumerate(runs):
        if u is None or (type(u) is float and 0.0 <= u <= 1.0):        # the usual cases, first
            continue
        if not is_finite_number(u):
            raise InputError(f"run {m}: expected a number in [0, 1] or null, got {u!r}",
                             path=path, line=line, field=fld)
        if not 0.0 <= u <= 1.0:
            raise InputError(f"run {m}: probability {u!r} is outside [0, 1]",
                             path=path, line=line, field=fld)


def _read_unique(path: str, parse, rejects: "Rejects | None" = None,
                 seen: dict | None = None) -> Iterator:
    """Parse each line; ids must be unique (in this file and in `seen`, id -> 'file:line')."""
    seen = {} if seen is None else seen
    n_before, n_ok = len(rejects or ()), 0
    for line_no, obj, raw in iter_jsonl_raw(path, rejects):
        try:
            rec = parse(obj, path=path, line=line_no)
            if rec.id in seen:
                raise InputError(f"duplicate id {rec.id!r} (first at {seen[rec.id]})",
                                 path=path, line=line_no, field="id")
        except InputError as err:
            if rejects is None:
                raise
            rejects.add(err, raw)
            continue
        seen[rec.id] = f"{path}:{line_no}"
        n_ok += 1
        yield rec
    if n_ok == 0:      # only reachable under skip: every record was rejected
        raise InputError(f"empty file: no valid JSON records ({len(rejects) - n_before} line(s) rejected)",
                         path=path)


def read_pairs(path: str, *, rejects: "Rejects | None" = None) -> list[Pair]:
    return list(_read_unique(path, pair_from_json, rejects))


def read_signals(path: str, *, rejects: "Rejects | None" = None, meta_keys: Iterable[str] | None = None) -> list[Signals]:
    """meta_keys: keep only these keys of each record's meta (a reader that needs few of them holds less:
    200k records' expert costs are most of their memory)."""
    keep = None if meta_keys is None else frozenset(meta_keys)
    return list(_read_unique(path, functools.partial(signals_from_json, meta_keys=keep), rejects))


def read_signals_many(paths: Iterable[str], *, rejects: "Rejects | None" = None) -> list[Signals]:
    """Concatenate several signals files; ids must be unique across all of them."""
    out, seen = [], {}
    for path in paths:
        out += _read_unique(path, signals_from_json, rejects, seen)
    return out


def write_pairs(path: str, pairs: Iterable[Pair]) -> int:
    return write_jsonl(path, (p.to_json() for p in pairs))


def write_signals(path: str, signals: Iterable[Signals]) -> int:
    return write_jsonl(path, (s.to_json() for s in signals))
