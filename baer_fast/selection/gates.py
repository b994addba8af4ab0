"""The two condition-level gates (paper Sec. 2.3, 3.4) as pure decisions on correctness vectors.

Correctness in, decision records out; knows nothing about fitting or files. Every
vector passed here comes from non-test rows only.

- Routing gate: stacking is the initial choice; the router replaces it only if its
  out-of-fold routed accuracy is STRICTLY higher than the stack's under the same folds.
- Reference gate: the reference head is deployed only if it beats the strongest
  external baseline (the best single non-reference expert on all non-test rows; ties to
  the first name) by a positive accuracy margin on BOTH the selection and the
  calibration split. Advancement is by margin, not significance.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from baer_fast.features.evidence import EPS, evidence, runs_tensor

HEAD_CHOICES = ("auto", "stack", "route", "reference")


def expert_correct(records: Sequence, experts: Sequence[str], y: np.ndarray, eps: float = EPS) -> np.ndarray:
    """[N, K] bool: sign(p_k - 0.5) == y (an undecided or missing expert is wrong)."""
    p, _, _, _ = evidence(runs_tensor(records, experts), eps)
    return np.sign(p - 0.5) == y[:, None]


def head_correct(scores: np.ndarray, y: np.ndarray) -> np.ndarray:
    """[N] bool: the head predicts a when s >= 0 (Eq. 1)."""
    return np.where(np.asarray(scores) >= 0, 1, -1) == y


def _acc(correct: np.ndarray, mask: np.ndarray) -> float:
    return float(correct[mask].mean()) if mask.any() else 0.0


def router_gate(route_cv: np.ndarray, stack_cv: np.ndarray) -> dict:
    """route_cv, stack_cv: [N] bool out-of-fold correctness on the same rows and folds."""
    r, s = float(route_cv.mean()), float(stack_cv.mean())
    return {"passed": bool(r > s), "route_cv_accuracy": r, "stack_cv_accuracy": s, "margin": r - s,
            "rule": "route deployed iff 5-fold CV routed accuracy > stack CV accuracy (non-test rows)"}


def reference_gate(ref_correct: np.ndarray, base_correct: np.ndarray, base_names: Sequence[str],
                   roles: Sequence[str]) -> dict:
    """ref_correct [N] bool; base_correct [N, K] bool for the candidate external baselines."""
    roles = np.asarray(roles)
    sel, cal = roles == "selection", roles == "calibration"
    dev = base_correct.mean(axis=0)
    k = int(np.argmax(dev))
    m_sel = _acc(ref_correct, sel) - _acc(base_correct[:, k], sel)
    m_cal = _acc(ref_correct, cal) - _acc(base_correct[:, k], cal)
    return {"passed": bool(m_sel > 0 and m_cal > 0), "baseline": base_names[k],
            "baseline_dev_accuracy": float(dev[k]),
            "reference": {"selection_accuracy": _acc(ref_correct, sel), "calibration_accuracy": _acc(ref_correct, cal)},
            "baseline_accuracy": {"selection_accuracy": _acc(base_correct[:, k], sel),
                                  "calibration_accuracy": _acc(base_correct[:, k], cal)},
            "selection_margin": m_sel, "calibration_margin": m_cal,
            "rule": "reference deployed iff it beats the best non-reference expert (chosen on non-test rows) "
                    "by > 0 on BOTH selection and calibration"}


def decide(route: dict | None, reference: dict | None, forced: str = "auto") -> tuple[str, str]:
    """-> (deployed head kind, reason). A passing reference gate wins over a passing router."""
    if forced != "auto":
        return forced, f"forced by --head {forced}"
    if reference is not None and reference["passed"]:
        return "reference", (f"reference beats {reference['baseline']} by "
                             f"{100 * reference['selection_margin']:+.1f}/{100 * reference['calibration_margin']:+.1f} "
                             "points on selection/calibration")
    if route is not None and route["passed"]:
        return "route", (f"router CV accuracy {100 * route['route_cv_accuracy']:.1f} > stack "
                         f"{100 * route['stack_cv_accuracy']:.1f}")
    why = ["stacking is the initial choice"]
    if route is not None:
        why.append(f"router CV {100 * route['route_cv_accuracy']:.1f} <= stack {100 * route['stack_cv_accuracy']:.1f}")
    if reference is not None:
        why.append(f"reference margin vs {reference['baseline']} "
                   f"{100 * reference['selection_margin']:+.1f}/{100 * reference['calibration_margin']:+.1f} "
                   "(selection/calibration) is not positive on both")
    return "stack", "; ".join(why)
