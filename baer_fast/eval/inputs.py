"""What `eval` reads, and the checks that its signals, scores and head belong together.

`read_scores` reads a scores file and the one `head` and `condition` its records name (a file
mixing two is refused). `check_against_head` refuses scores another head wrote (kind, condition,
and the head checksum of the score run's progress record when there is one) and a head whose
experts are absent from the signals. `split_spec` takes the split the head was fitted on
(`fitted_on.split`); an explicit --split-seed that disagrees is refused, since its test rows
would hold training rows. `align` puts the scores in signals order; a pair without a score is
an error naming the remedy, or under --on-error skip is left out and counted (`LeftOut`).
Knows nothing about metrics; takes the loaded artifact as a plain dict.
"""
from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field

import numpy as np

from baer_fast.errors import InputError
from baer_fast.io.jsonl import is_finite_number, iter_jsonl_raw
from baer_fast.io.splits import SplitSpec

log = logging.getLogger("baer_fast")
DEFAULT_SEED = SplitSpec().seed


@dataclass
class Scores:
    path: str
    by_id: dict = field(default_factory=dict)     # pair id -> score
    named: dict = field(default_factory=dict)     # "head" / "condition" -> (value, line of its first record)


@dataclass
class LeftOut:
    """What --on-error skip set aside; reported, never dropped silently."""
    bad_records: int = 0          # bad lines of the signals or scores
    unscored: int = 0             # signals pairs with no score (any split)
    unscored_in_split: int = 0    # of those, in the evaluated split
    first_unscored: str | None = None
    first_error: str | None = None

    def __bool__(self) -> bool:
        return bool(self.bad_records or self.unscored)

    def to_json(self) -> dict:
        return dict(self.__dict__)


def _record(obj: dict, path: str, line: int, out: Scores) -> None:
    for key in ("id", "score"):
        if key not in obj:
            raise InputError("missing required field", path=path, line=line, field=key)
    if not isinstance(obj["id"], str) or not obj["id"].strip():
        raise InputError(f"expected a non-empty string, got {obj['id']!r}", path=path, line=line, field="id")
    if not is_finite_number(obj["score"]):
        raise InputError(f"expected a finite number, got {obj['score']!r}", path=path, line=line, field="score")
    if obj["id"] in out.by_id:
        raise InputError(f"duplicate id {obj['id']!r}", path=path, line=line, field="id")


def _named(obj: dict, path: str, line: int, out: Scores) -> None:
    """One head and one condition per file: a second value is another head's scores mixed in."""
    for key in ("head", "condition"):
        value = obj.get(key)
        if not isinstance(value, str):
            continue
        first = out.named.setdefault(key, (value, line))
        if first[0] != value:
            raise InputError(f"{value!r} differs from {first[0]!r} (line {first[1]}): a scores file holds the "
                             "scores of one head; score each condition into its own file", path=path, line=line,
                             field=key)


def read_scores(path: str, *, rejects=None) -> Scores:
    """Every record's id and score (bad lines raise, or go to `rejects`); head and condition named once."""
    out = Scores(path)
    for line, obj, raw in iter_jsonl_raw(path, rejects):
        try:
            _record(obj, path, line, out)
        except InputError as err:
            if rejects is None:
                raise
            rejects.add(err, raw)
            continue
        _named(obj, path, line, out)
        out.by_id[obj["id"]] = float(obj["score"])
    return out


def _score_run(scores_path: str) -> dict:
    """The fingerprint `score` recorded in the scores' progress record ({} without one)."""
    from baer_fast.io.resumable import progress_path

    try:
        with open(progress_path(scores_path), encoding="utf-8") as fh:
            fp = json.load(fh).get("fingerprint") or {}
    except (OSError, ValueError, AttributeError):
        return {}
    return fp if isinstance(fp, dict) and fp.get("command") == "score" else {}


def _progress_head(scores_path: str) -> str | None:
    """The head checksum `score` recorded in the scores' progress record, if that record exists."""
    head = _score_run(scores_path).get("head")
    return head if isinstance(head, str) else None


def check_against_head(scores: Scores, art: dict, *, head_path: str, records, signals_path: str) -> None:
    """Scores of another head, or signals without the head's experts, are refused (one line each)."""
    for key in ("condition", "head"):
        value, line = scores.named.get(key, (None, None))
        if value is not None and value != art.get(key):
            raise InputError(f"the scores name {key} {value!r} but --head {head_path} is {key} {art.get(key)!r}: "
                             "evaluate scores with the head that wrote them", path=scores.path, line=line, field=key)
    written_by = _progress_head(scores.path)
    if written_by is not None and art.get("checksum") and written_by != art["checksum"]:
        raise InputError(f"these scores were written by head {written_by}, not by --head {head_path} "
                         f"({art['checksum']}; progress record {scores.path}.progress.json): evaluate scores with "
                         "the head that wrote them", path=scores.path, field="head")
    present = {k for r in records for k in r.experts}
    missing = [e for e in art.get("experts", []) if e not in present]
    if missing:
        msg = (f"expert {missing[0]!r} of --head {head_path} ({art.get('condition')!r}) is absent from every "
               f"record ({len(missing)} missing)")
        if art.get("cascade"):      # a cascade's stage-2 experts may never have run
            log.warning("%s: %s (a cascade's later stage may not have run on any pair)", signals_path, msg)
            return
        raise InputError(f"{msg}: these are not the signals of the head's condition", path=signals_path,
                         field=f"experts.{missing[0]}")


def split_spec(art: dict | None, split_seed: str | None, *, head_path: str | None,
               scores_path: str | None = None) -> tuple[SplitSpec, str]:
    """The split to evaluate on, and where it came from ("head", "scores", "--split-seed" or "default"):
    --head's fitted_on.split, else the one the score run recorded from its head (a fitted head's)."""
    recorded, source = ((art or {}).get("fitted_on") or {}).get("split"), "head"
    where = f"--head {head_path} was fitted on"
    if art is None and scores_path:
        recorded, source = _score_run(scores_path).get("split"), "scores"
        where = f"the head that wrote {scores_path} was fitted on (its progress record)"
    if not isinstance(recorded, dict) or not recorded:   # no head, or one that read no labels (transfer, default)
        return SplitSpec(seed=split_seed or DEFAULT_SEED), "--split-seed" if split_seed else "default"
    spec = SplitSpec(**{k: recorded[k] for k in ("seed", "selection", "calibration") if k in recorded})
    if split_seed is not None and split_seed != spec.seed:
        raise InputError(f"{split_seed!r} is not the split {where} (seed {spec.seed!r}): that split's test rows "
                         "would include the head's training rows; drop --split-seed to use the head's split",
                         field="--split-seed")
    return spec, source


def _missing_message(path: str, missing: list, n: int) -> str:
    aside = f"{path}.rejects.jsonl"
    why = f"; `score --on-error skip` set records aside in {aside}" if os.path.exists(aside) else ""
    return (f"{len(missing)} pairs of the signals have no score (first: {missing[0]!r}){why}; every pair must be "
            f"scored: fix and score them, or pass --on-error skip to evaluate the {n - len(missing)} scored pairs "
            "only (the left-out pairs are counted in the report)")


def align(scores: Scores, records, roles, *, split_rows, skip: bool):
    """(records, roles, [N] scores) of the scored pairs, and the LeftOut count.

    Without `skip` every pair must have a score; `split_rows(roles)` marks the evaluated split."""
    missing = [r.id for r in records if r.id not in scores.by_id]
    if missing and not skip:
        raise InputError(_missing_message(scores.path, missing, len(records)), path=scores.path, field="id")
    keep = np.array([r.id in scores.by_id for r in records], bool)
    left = LeftOut(unscored=len(missing), unscored_in_split=int((split_rows(roles) & ~keep).sum()),
                   first_unscored=missing[0] if missing else None)
    records = [r for r, k in zip(records, keep) if k]
    if not records:
        raise InputError("no pair of the signals has a score: are these the scores of these signals?",
                         path=scores.path, field="id")
    roles = [x for x, k in zip(roles, keep) if k]
    return records, roles, np.array([scores.by_id[r.id] for r in records], dtype=np.float64), left
