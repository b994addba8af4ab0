"""Any local table (.jsonl, .json, .csv, .parquet) -> pairs, by naming its columns.

Either `--question-col Q --chosen-col C --rejected-col R` (chosen/rejected placed on a/b by a
hash of the id, as for every chosen/rejected source) or `--question-col Q --a-col A --b-col B
--label-col L` (labels a/b/tie, also A/B, 1/2, model_a/model_b, 0 = tie). Optional
`--subset-col`, `--category-col`, `--id-col` (default id: `<file stem>-<line>`). A question
cell may be a string or a list of {role, content} messages. CSV cells are text; parquet needs pyarrow.
"""
from __future__ import annotations

from baer_fast.errors import InputError
from baer_fast.io.adapters import Imported
from baer_fast.io.adapters._conv import from_messages
from baer_fast.io.adapters._rows import chosen_rejected_pair, convert, file_stem, rows, summary

LABELS = {"a": "a", "b": "b", "tie": "tie", "A": "a", "B": "b", "1": "a", "2": "b", "0": "tie",
          "model_a": "a", "model_b": "b"}


def _check(opts) -> None:
    pairwise = opts.a_col or opts.b_col or opts.label_col
    if not opts.question_col:
        raise InputError("table needs --question-col", field="--question-col")
    if pairwise and not (opts.a_col and opts.b_col and opts.label_col and not opts.chosen_col):
        raise InputError("give --a-col, --b-col and --label-col together (and no --chosen-col)", field="--a-col")
    if not pairwise and not (opts.chosen_col and opts.rejected_col):
        raise InputError("table needs --chosen-col and --rejected-col, or --a-col, --b-col and --label-col",
                         field="--chosen-col")


def _question(row, col: str):
    cell = row.obj.get(col)
    if isinstance(cell, list):
        turns = tuple(from_messages(cell, row=row, field=col))
        return turns[0][1] if len(turns) == 1 else turns
    return row.need(col)


def _builder(opts):
    def build(row):
        from baer_fast.io.records import Pair

        pid = str(row.need(opts.id_col, (str, int))) if opts.id_col else f"{file_stem(row.path)}-{row.line}"
        fields = {"subset": str(row.need(opts.subset_col, (str, int))) if opts.subset_col else "default",
                  "category": str(row.need(opts.category_col, (str, int))) if opts.category_col else None}
        question = _question(row, opts.question_col)
        if opts.chosen_col:
            return chosen_rejected_pair(pid, question, row.need(opts.chosen_col), row.need(opts.rejected_col),
                                        **fields)
        raw = str(row.need(opts.label_col, (str, int)))
        if raw not in LABELS:
            raise row.error(f"label {raw!r} is not one of {', '.join(sorted(LABELS))}", opts.label_col)
        return Pair(pid, question, row.need(opts.a_col), row.need(opts.b_col), label=LABELS[raw], **fields)
    return build


def load(src: str, *, rejects=None, options=None) -> Imported:
    _check(options)
    pairs, dropped = convert(rows(src, rejects), _builder(options), rejects)
    out = Imported(pairs)
    out.notes.append(summary("table", pairs, dropped))
    return out
