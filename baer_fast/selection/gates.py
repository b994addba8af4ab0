"""The condition-level decisions (paper Sec. 2.3, 3.4) on correctness vectors; knows nothing about fitting.

Every vector passed here comes from non-test rows only.

- Head rule: shrunk / stack / constant / route by the standard-error rule on nested
  out-of-fold accuracy (`selection.rule`); its record arrives here as `rule`.
- Reference gate: the reference head is deployed only if it beats the strongest
  external baseline (the best protocol of the baseline pool on all non-test rows, each
  under its stronger reading; ties to the first name) by a positive accuracy margin on
  BOTH the selection and the calibration split. Advancement is by margin, not significance.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

HEAD_CHOICES = ("auto", "mean", "vote", "shrunk", "stack", "constant", "route", "reference")


def head_correct(scores: np.ndarray, y: np.ndarray) -> np.ndarray:
    """[N] bool: the head predicts a when s >= 0 (Eq. 1)."""
    return np.where(np.asarray(scores) >= 0, 1, -1) == y


def _acc(correct: np.ndarray, mask: np.ndarray) -> float:
    return float(correct[mask].mean()) if mask.any() else 0.0


def reference_gate(ref_correct: np.ndarray, base_correct: np.ndarray, base_names: Sequence[str],
                   roles: Sequence[str], readings: Sequence[str] | None = None) -> dict:
    """ref_correct [N] bool; base_correct [N, K] credit (bool or [0, 1]) of the baseline pool."""
    roles = np.asarray(roles)
    sel, cal = roles == "selection", roles == "calibration"
    dev = base_correct.mean(axis=0)
    k = int(np.argmax(dev))
    m_sel = _acc(ref_correct, sel) - _acc(base_correct[:, k], sel)
    m_cal = _acc(ref_correct, cal) - _acc(base_correct[:, k], cal)
    return {"passed": bool(m_sel > 0 and m_cal > 0), "baseline": base_names[k],
            "baseline_reading": readings[k] if readings is not None else "strict",
            "baseline_dev_accuracy": float(dev[k]),
            "reference": {"selection_accuracy": _acc(ref_correct, sel), "calibration_accuracy": _acc(ref_correct, cal)},
            "baseline_accuracy": {"selection_accuracy": _acc(base_correct[:, k], sel),
                                  "calibration_accuracy": _acc(base_correct[:, k], cal)},
            "selection_margin": m_sel, "calibration_margin": m_cal,
            "rule": "reference deployed iff it beats the best external protocol (chosen on non-test rows, "
                    "stronger reading) by > 0 on BOTH selection and calibration"}


def decide(rule: dict | None, reference: dict | None, forced: str = "auto") -> tuple[str, str]:
    """-> (deployed head kind, reason). A passing reference gate wins over the rule's choice."""
    if forced != "auto":
        return forced, f"forced by --head {forced}"
    if reference is not None and reference["passed"]:
        return "reference", (f"reference beats {reference['baseline']} by "
                             f"{100 * reference['selection_margin']:+.1f}/{100 * reference['calibration_margin']:+.1f} "
                             "points on selection/calibration")
    choice = rule["choice"] if rule is not None else "stack"
    why = []
    for st in (rule or {}).get("steps", []):
        verb = "replaces" if st["advanced"] else "does not replace"
        why.append(f"{st['candidate']} {verb} {st['against']} (out-of-fold gain {100 * st['gain']:+.1f} "
                   f"vs noise {st.get('bar', 1.0):g} x {100 * st['se']:.1f} points)")
    if reference is not None:
        why.append(f"reference margin vs {reference['baseline']} "
                   f"{100 * reference['selection_margin']:+.1f}/{100 * reference['calibration_margin']:+.1f} "
                   "(selection/calibration) is not positive on both")
    return choice, "; ".join(why) or f"{choice} is the only candidate"
