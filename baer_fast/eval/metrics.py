"""Accuracy, coverage, exact McNemar and oracle headroom of a head vs. the external protocols.

A head predicts a when s >= 0 (Eq. 1); that is the headline. Its order-averaged reading
(`accuracy_native`) is what the native reading gives a protocol: Eq. 1 judged in both display
orders and averaged, i.e. half credit where s == 0 (a pair that is a fixed point of the swap
scores exactly 0 under any antisymmetric head, and Eq. 1's "a" then depends only on which
response was shown first). A single protocol is read two ways: strict (the
paper's Eq. 11: undecided or missing = error) and native (each display order judged on
its own, credit averaged over the orders); the baseline comparison uses the stronger
reading, McNemar is reported against both (native: the exact paired sign-flip test,
`sign_flip_exact`). Pairs whose label is a tie or absent are excluded and counted.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np
from scipy.stats import binom, binomtest

from baer_fast.features.evidence import evidence, memoized, runs_tensor
from baer_fast.heads.single import baseline_pool, native_credit, strict_correct


def label_signs(records: Sequence) -> np.ndarray:
    """[N] +1 for label a, -1 for b, 0 for tie or unlabelled."""
    return memoized(records, ("labels",), lambda: np.array([{"a": 1, "b": -1}.get(r.label, 0) for r in records],
                                                           dtype=np.int64))


def expert_predictions(records: Sequence, experts: Sequence[str]) -> np.ndarray:
    """[N, K] sign(p_k - 0.5) per expert; 0 where the expert is missing or undecided."""
    return memoized(records, ("predictions", *experts),
                    lambda: np.sign(evidence(runs_tensor(records, experts))[0] - 0.5).astype(np.int64))


def head_native_credit(scores: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per pair, Eq. 1's credit averaged over the two display orders: 1 or 0 where s != 0,
    and 1/2 where s == 0 (shown as given the head says a, swapped it says the other)."""
    scores = np.asarray(scores, dtype=np.float64)
    return np.where(scores == 0, 0.5, (head_predictions(scores) == y).astype(np.float64))


def head_predictions(scores: np.ndarray) -> np.ndarray:
    """Eq. 1: a when s >= 0, else b (a head always predicts)."""
    return np.where(np.asarray(scores) >= 0, 1, -1)


def mcnemar_exact(correct_x: np.ndarray, correct_y: np.ndarray) -> dict:
    """Exact two-sided McNemar test on paired correctness vectors."""
    b = int(np.sum(correct_x & ~correct_y))
    c = int(np.sum(~correct_x & correct_y))
    p = 1.0 if b + c == 0 else float(binomtest(b, b + c, 0.5).pvalue)
    return {"x_only": b, "y_only": c, "p_value": p}


def strongest(correct: np.ndarray, names: Sequence[str]) -> tuple[str, float]:
    """The expert with the highest accuracy (ties: first in `names` order)."""
    acc = correct.mean(axis=0) if len(correct) else np.zeros(len(names))
    k = int(np.argmax(acc))
    return names[k], float(acc[k])


def sign_flip_exact(credit_x: np.ndarray, credit_y: np.ndarray, scale: int = 1) -> dict:
    """Exact two-sided paired sign-flip test on per-pair credits (McNemar generalised to partial credit).

    d_i = credit_x - credit_y, each a multiple of 1/scale. Under H0 (the two methods are
    exchangeable on every pair) each d_i keeps its size and takes either sign with
    probability 1/2; p = P(|sum of signed d| >= |observed sum|), enumerated exactly.
    With 0/1 credits (scale 1) this is exactly the exact McNemar test.
    """
    d = np.rint((np.asarray(credit_x, np.float64) - np.asarray(credit_y, np.float64)) * scale).astype(np.int64)
    if not np.allclose(d, (np.asarray(credit_x) - np.asarray(credit_y)) * scale, atol=1e-9):
        raise ValueError(f"credits are not multiples of 1/{scale}")
    a = np.abs(d[d != 0])
    obs = int(d.sum())
    dist = np.ones(1)                        # P(S = s), s from -total to +total
    total = 0
    for v, c in zip(*np.unique(a, return_counts=True)):
        q = binom.pmf(np.arange(c + 1), c, 0.5)                   # v * (2B - c), B ~ Bin(c, 1/2)
        if len(dist) * (2 * v * c + 1) <= DENSE_WORK:
            part = np.zeros(2 * v * c + 1)
            part[::2 * v] = q
            dist = np.convolve(dist, part)
        else:
            dist = _convolve_lattice(dist, q, 2 * int(v))
        total += v * c
    s = np.arange(-total, total + 1)
    p = float(min(1.0, dist[np.abs(s) >= abs(obs)].sum())) if total else 1.0
    return {"x_better": int((d > 0).sum()), "y_better": int((d < 0).sum()), "sum_diff": obs / scale,
            "scale": scale, "p_value": p}


DENSE_WORK = 10 ** 8     # products of one dense convolution step (~0.1 s) above which only nonzero ones are formed


def _support(x: np.ndarray) -> tuple[int, int]:
    """[start, stop) of the nonzero entries of x ((0, 0) if none)."""
    nz = np.flatnonzero(x)
    return (int(nz[0]), int(nz[-1]) + 1) if len(nz) else (0, 0)


def _convolve_lattice(dist: np.ndarray, q: np.ndarray, step: int) -> np.ndarray:
    """np.convolve(dist, part) for part = q at every `step`-th index, forming only the nonzero products.

    The dense form costs len(dist) x step x len(q) and grows with the square of the pairs (minutes at
    80k test pairs); here each residue class of dist mod step meets q alone, and the exact zeros at
    both ends (binomial tails below the smallest double) are skipped: linear in the pairs. The sums
    are the same terms, so the result equals the dense one to rounding (ulps).
    """
    out = np.zeros(len(dist) + step * (len(q) - 1))
    d0, d1 = _support(dist)
    q0, q1 = _support(q)
    if d1 <= d0 or q1 <= q0:
        return out
    src, kern, base = dist[d0:d1], q[q0:q1], d0 + step * q0
    for r in range(min(step, len(src))):
        piece = np.convolve(src[r::step], kern)
        out[base + r:base + r + step * len(piece):step] = piece
    return out


def _run_scale(records: Sequence, name: str) -> int:
    """Least common multiple of the expert's run counts: native credits are multiples of 1/scale."""
    out = 1
    for r in records:
        n = len(r.experts.get(name) or ())
        if n:
            out = math.lcm(out, n)
    return out


def _strongest_entry(name, strict, native, correct_h, rows, records) -> dict:
    """The fair figures of one protocol on `rows`, with McNemar against both readings."""
    a_s, a_n = float(strict[rows].mean()), float(native[rows].mean())
    reading = "native" if a_n > a_s else "strict"
    mc_s = mcnemar_exact(correct_h[rows], strict[rows])
    mc_n = sign_flip_exact(correct_h[rows].astype(np.float64), native[rows], _run_scale(records, name))
    return {"expert": name, "reading": reading, "accuracy": max(a_s, a_n), "accuracy_strict": a_s,
            "accuracy_native": a_n, "mcnemar_strict": mc_s, "mcnemar_native": mc_n,
            "mcnemar": mc_n if reading == "native" else mc_s}


def evaluate(records: Sequence, scores: np.ndarray, roles: Sequence[str], *, split: str = "test",
             experts: Sequence[str] | None = None, baselines: Sequence[str] | None = None,
             internal: Sequence[str] = ()) -> dict:
    """Metrics of `scores` on the rows of `split` ("test", "dev" = non-test, or "all").

    The comparison (strongest baseline, McNemar, oracle) ranges over the baseline pool
    (`heads.single.baseline_pool`: the external protocols, or `baselines`); each protocol
    is read both ways (strict and native) and compared under its stronger reading.
    """
    experts = list(experts) if experts is not None else sorted({k for r in records for k in r.experts})
    pool = baseline_pool(experts, internal=internal, baselines=baselines)
    y = label_signs(records)
    roles = np.asarray(roles)
    in_split = {"all": np.ones(len(records), bool), "dev": roles != "test"}.get(split, roles == split)
    dev_rows = (roles != "test") & (y != 0)
    rows = in_split & (y != 0)
    pred_e = expert_predictions(records, experts)
    strict = strict_correct(records, experts, y)
    native = native_credit(records, experts, y)
    correct_h = head_predictions(scores) == y
    out = {"split": split, "n_pairs": int(in_split.sum()), "n_scored": int(rows.sum()),
           "n_tie_labels": int(np.sum(in_split & np.array([r.label == "tie" for r in records]))),
           "n_unlabelled": int(np.sum(in_split & np.array([r.label is None for r in records]))),
           "accuracy": float(correct_h[rows].mean()) if rows.any() else None,      # None: no labelled row
           "accuracy_native": float(head_native_credit(scores, y)[rows].mean()) if rows.any() else None,
           "n_score_ties": int(np.sum(np.asarray(scores)[rows] == 0)),
           "coverage": 1.0, "baseline_pool": pool, "pool_from": "default" if baselines is None else "--baselines",
           "experts": {}}
    for k, name in enumerate(experts):
        a_s = float(strict[rows, k].mean()) if rows.any() else None
        a_n = float(native[rows, k].mean()) if rows.any() else None
        out["experts"][name] = {"accuracy": a_s, "accuracy_strict": a_s, "accuracy_native": a_n,
                                "accuracy_fair": max(a_s, a_n) if rows.any() else None, "baseline": name in pool,
                                "coverage": float((pred_e[in_split, k] != 0).mean()) if in_split.any() else None}
    if pool and rows.any():
        idx = [experts.index(n) for n in pool]
        fair = np.maximum(strict[rows][:, idx].mean(0), native[rows][:, idx].mean(0))
        k = idx[int(np.argmax(fair))]                 # first maximum: pool (sorted) order
        best = _strongest_entry(experts[k], strict[:, k], native[:, k], correct_h, rows, records)
        out["strongest_baseline"] = out["strongest_on_test"] = best
        if dev_rows.any():
            fair_dev = np.maximum(strict[dev_rows][:, idx].mean(0), native[dev_rows][:, idx].mean(0))
            kd = idx[int(np.argmax(fair_dev))]
            out["strongest_on_dev"] = {**_strongest_entry(experts[kd], strict[:, kd], native[:, kd], correct_h,
                                                          rows, records), "dev_accuracy": float(fair_dev.max())}
        # per pair, the best credit any pool protocol earns under either reading (>= every fair accuracy)
        out["oracle_any_expert"] = float(np.maximum(strict[rows][:, idx], native[rows][:, idx]).max(axis=1).mean())
    return out


def pool_tag(report: dict, name: str) -> str:
    """' (internal)' for an expert the default pool leaves out, ' (not in --baselines)' for one an explicit
    pool leaves out (it may be any protocol), '' for a baseline."""
    if report["experts"][name].get("baseline", True):
        return ""
    return " (not in --baselines)" if report.get("pool_from") == "--baselines" else " (internal)"


def _p(x) -> str:
    """A fraction as a 7-wide percentage; blank when undefined (None or NaN)."""
    return f"{'–':>7}" if x is None or x != x else f"{100 * x:7.2f}"


def ties_sentence(report: dict) -> str:
    """Pairs scored exactly 0 and BAER averaged over both orders ('' when none); the table's and the HTML's."""
    n, t = report.get("n_score_ties"), report.get("strongest_baseline")
    if not n or not t:
        return ""
    return (f"{n} pair{'s' * (n != 1)} scored exactly 0 (every expert's evidence cancels and no length tie-break "
            f"decided it): Eq. 1 calls {'them' if n != 1 else 'it'} a; averaged over both orders BAER "
            f"{100 * report['accuracy_native']:.2f}%, {100 * (report['accuracy_native'] - t['accuracy']):+.2f} points")


def dev_sentence(report: dict) -> str:
    d = report.get("strongest_on_dev")
    return (f"strongest baseline chosen on the dev rows: {d['expert']} ({d['reading']} reading), "
            f"{100 * d['accuracy']:.2f}% here" if d else "")


def format_table(report: dict, *, title: str = "") -> str:
    """A plain-text table of one evaluation report: both readings of every protocol."""
    lines = [title] if title else []
    lines.append(f"split={report['split']} pairs={report['n_pairs']} scored={report['n_scored']} "
                 f"tie-labels-excluded={report['n_tie_labels']} unlabelled={report['n_unlabelled']}")
    head = report.get("head", "head")
    if report["accuracy"] is None:
        lines.append("  no labelled (a/b) pair in this split: accuracy is undefined")
    names = {name: name + pool_tag(report, name) for name in report["experts"]}
    w = max([44, len(f"BAER ({head})"), *map(len, names.values())])      # long names (JudgeBench's) stay aligned
    lines.append(f"  {'method':<{w}} {'strict':>7} {'native':>7} {'cov':>7}")
    lines.append(f"  {'BAER (' + head + ')':<{w}} {_p(report['accuracy'])} {_p(report.get('accuracy_native'))} "
                 f"{_p(report['coverage'])}")
    for name, m in sorted(report["experts"].items(), key=lambda kv: -(kv[1]["accuracy_fair"] or 0)):
        lines.append(f"  {names[name]:<{w}} {_p(m['accuracy_strict'])} {_p(m['accuracy_native'])} {_p(m['coverage'])}")
    if "strongest_baseline" in report:
        t = report["strongest_baseline"]
        lines.append(f"  strongest baseline on this split: {t['expert']} ({t['reading']} reading) "
                     f"{100 * t['accuracy']:.2f}; BAER {100 * (report['accuracy'] - t['accuracy']):+.2f} points; "
                     f"McNemar p strict={t['mcnemar_strict']['p_value']:.3g} "
                     f"native={t['mcnemar_native']['p_value']:.3g}")
        lines += [f"  {line}" for line in (ties_sentence(report), dev_sentence(report)) if line]
        lines.append(f"  any-baseline oracle: {100 * report['oracle_any_expert']:.2f}  "
                     f"(pool: {len(report['baseline_pool'])} external protocols)")
    return "\n".join(lines)
