"""Anthropic HH-RLHF (anthropics/hh-rlhf) `{chosen, rejected}` transcripts -> pairs; no judge outputs.

SRC is a `*.jsonl[.gz]` file or a folder of them (e.g. `helpful-base/test.jsonl.gz`, or a
checkout's root, whose `red-team-attempts/` is skipped: it holds no pairs). The turns
both transcripts share up to the last common user turn are the question (a conversation when it
is more than one turn), the final assistant replies the responses; identical transcripts are
kept as ties. Subset = the file's folder (helpful-base, harmless-base, ...), category = helpful
or harmless. Ids: `hh-<folder>-<file stem>-<line>`.
"""
from __future__ import annotations

import os

from baer_fast.io.adapters import Imported
from baer_fast.io.adapters._conv import from_hh, split_pair
from baer_fast.io.adapters._rows import chosen_rejected_pair, convert, file_stem, rows, skipping, summary


def _names(path: str) -> tuple[str, str]:
    folder = os.path.basename(os.path.dirname(os.path.abspath(path))) or "hh"
    return folder, file_stem(path)


def _build(row):
    folder, stem = _names(row.path)
    chosen = from_hh(row.need("chosen"), row=row, field="chosen")
    rejected = from_hh(row.need("rejected"), row=row, field="rejected")
    question, c, r, diverged = split_pair(chosen, rejected, row=row, fields=("chosen", "rejected"))
    category = "harmless" if "harmless" in folder else "helpful" if "helpful" in folder else None
    return chosen_rejected_pair(f"hh-{folder}-{stem}-{row.line:05d}", question, c, r,
                                meta={"diverged": True} if diverged else None,
                                subset=folder, category=category)


# Upstream's red-team-attempts/ holds one transcript per attack with harmlessness scores, not
# chosen/rejected pairs: a checkout's root imports the four preference folders and skips it.
_NOT_PAIRS = "red-team-attempts"


def load(src: str, *, rejects=None, options=None) -> Imported:
    keep, skipped = skipping(lambda path: _NOT_PAIRS in os.path.relpath(path, src).split(os.sep))
    pairs, dropped = convert(rows(src, rejects, keep), _build, rejects)
    out = Imported(pairs, dropped=dropped)
    out.notes.append(summary("hh-rlhf", pairs)
                     + (f"; skipped {len(skipped)} file(s) of {_NOT_PAIRS}/ (transcripts, not pairs)" if skipped else ""))
    return out
