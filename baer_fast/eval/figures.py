"""The figures `eval` adds beside accuracy: per subset/category, bias, calibration, bootstrap CI.

`figures(...)` returns the keys `per_subset`, `per_category`, `bias`, `calibration`,
`accuracy_ci` (and `leaderboard` when asked) on the rows `evaluate` uses (the split; labelled
rows for accuracy figures, every row of the split for position bias); `format_figures` writes
them as plain-text tables under the main one.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class FigureOptions:
    bootstrap: int = 1000          # resamples of the accuracy interval
    seed: int = 0                  # its generator's seed
    leaderboard: str | None = None  # "rewardbench" (section scores) or "rewardbench-2" (best-of-N per prompt)


def figures(records, scores, roles, *, split: str, experts, model: str = "head",
            options: FigureOptions = FigureOptions()) -> dict:
    from baer_fast.eval.bias import bias
    from baer_fast.eval.bootstrap import accuracy_ci
    from baer_fast.eval.breakdown import per_category, per_subset
    from baer_fast.eval.calibration import calibration
    from baer_fast.eval.metrics import label_signs
    from baer_fast.eval.report import split_mask

    scores = np.asarray(scores, dtype=np.float64)
    in_split = split_mask(roles, split)
    rows = in_split & (label_signs(records) != 0)
    experts = list(experts)
    out = {"per_subset": per_subset(records, scores, experts, rows),
           "per_category": per_category(records, scores, experts, rows),
           "bias": bias(records, scores, experts, in_split),
           "calibration": calibration(records, scores, experts, rows),
           "accuracy_ci": accuracy_ci(records, scores, experts, rows, n_resamples=options.bootstrap,
                                      seed=options.seed)}
    if options.leaderboard:
        from baer_fast.eval.leaderboard import LEADERBOARDS
        from baer_fast.eval.metrics import head_predictions

        correct = head_predictions(scores) == label_signs(records)
        out["leaderboard"] = LEADERBOARDS[options.leaderboard](out["per_subset"], model=model, records=records,
                                                               correct=correct, rows=rows)
    return out


def _pct(x) -> str:
    return "    –" if x is None else f"{100 * x:5.1f}"


def _num(x, fmt: str = ".4f") -> str:
    return "–" if x is None else format(x, fmt)


def format_figures(report: dict) -> str:
    lines = []
    for key, title in (("per_subset", "subset"), ("per_category", "category")):
        groups = report.get(key) or {}
        if groups:
            lines.append(f"  accuracy per {title} (BAER; n):")
            w = max(40, *(len(g) for g in groups))
            lines += [f"    {g:<{w}} {_pct(v['accuracy'])}  n={v['n']}" for g, v in groups.items()]
    ci = report.get("accuracy_ci", {}).get("head")
    if ci and ci.get("low") is not None:
        lines.append(f"  BAER accuracy {int(100 * ci['level'])}% bootstrap CI: [{_pct(ci['low']).strip()}, "
                     f"{_pct(ci['high']).strip()}] ({ci['n_resamples']} resamples, seed {ci['seed']})")
    cal = report.get("calibration", {}).get("head")
    if cal and cal.get("n"):
        lines.append(f"  BAER calibration of p_a: ECE {_num(cal['ece'])}, Brier {_num(cal['brier'])}, "
                     f"log-loss {_num(cal['log_loss'])} (n={cal['n']})")
    lines += _bias_lines(report.get("bias") or {})
    board = report.get("leaderboard")
    if board:
        name = "RewardBench 2 subsets (best-of-N per prompt)" if "prompts" in board else "RewardBench sections"
        lines.append(f"  {name}: " + ", ".join(f"{k} {_pct(v).strip()}" for k, v in board["sections"].items()))
        if board.get("note"):
            lines.append(f"  ({board['note']})")
    return "\n".join(lines)


def _bias_lines(b: dict) -> list:
    lines = []
    length = b.get("length") or {}
    if length.get("longer_wins"):
        lw = length["longer_wins"]
        pl = (length["prefers_longer"].get("BAER") or {}).get("rate")
        lines.append(f"  length: BAER prefers the longer response {_pct(pl).strip()}%; "
                     f"'longer wins' baseline accuracy {_pct(lw['accuracy']).strip()} "
                     f"(coverage {_pct(lw['coverage']).strip()})")
    pos = {k: v for k, v in (b.get("position") or {}).items() if v["n_run_pairs"]}
    if pos:
        w = max(40, *(len(k) for k in pos))
        lines.append(f"  {'position bias per expert':<{w + 2}} {'first-shown %':>14} {'consistency %':>14}")
        lines += [f"    {k:<{w}} {_pct(v['first_shown_rate']):>14} {_pct(v['consistency']):>14}"
                  for k, v in pos.items()]
    return lines
