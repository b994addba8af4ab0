"""Any local table (.jsonl, .json, .csv, .parquet) -> pairs, by naming its columns.

Either `--question-col Q --chosen-col C --rejected-col R` (chosen/rejected placed on a/b by a
hash of the id, as for every chosen/rejected source) or `--question-col Q --a-col A --b-col B
--label-col L`: labels a/b/tie or model_a/model_b (any case); other values, numbers above all
(0/1 means a/b in one dataset, tie/a in another), only through `--label-values A,B[,TIE]`.
Optional `--subset-col`, `--category-col`, `--id-col` (default id: `<file stem>-<line>`; cells
must not be blank). A question cell may be a string or a list of {role, content} messages.
CSV cells are text; parquet needs pyarrow.
"""
from __future__ import annotations

from baer_fast.errors import InputError
from baer_fast.io.adapters import Imported
from baer_fast.io.adapters._conv import from_messages
from baer_fast.io.adapters._rows import chosen_rejected_pair, convert, file_stem, rows, summary

LABELS = {"a": "a", "b": "b", "tie": "tie", "model_a": "a", "model_b": "b"}      # read in any case


def _check(opts) -> None:
    pairwise = opts.a_col or opts.b_col or opts.label_col
    if not opts.question_col:
        raise InputError("table needs --question-col", field="--question-col")
    if pairwise and not (opts.a_col and opts.b_col and opts.label_col and not opts.chosen_col):
        raise InputError("give --a-col, --b-col and --label-col together (and no --chosen-col)", field="--a-col")
    if not pairwise and not (opts.chosen_col and opts.rejected_col):
        raise InputError("table needs --chosen-col and --rejected-col, or --a-col, --b-col and --label-col",
                         field="--chosen-col")
    if getattr(opts, "label_values", None) and not opts.label_col:
        raise InputError("only means something with --label-col", field="--label-values")


def label_values(spec: str | None) -> dict[str, str]:
    """`--label-values A,B[,TIE]` -> {cell value: label}: the values meaning a better, b better, tie."""
    if not spec:
        return {}
    values = [v.strip() for v in spec.split(",")]
    if len(values) not in (2, 3) or "" in values or len(set(values)) != len(values):
        raise InputError(f"{spec!r}: expected two or three distinct values A,B[,TIE] (the label-column values "
                         "meaning a is better, b is better, tie), e.g. 0,1 or 1,2,0", field="--label-values")
    numbers = [float(v) for v in values if _is_number(v)]
    if len(set(numbers)) != len(numbers):
        raise InputError(f"{spec!r}: two of the values are the same number", field="--label-values")
    return dict(zip(values, ("a", "b", "tie")))


def _cell_text(cell) -> str:
    if isinstance(cell, float) and cell.is_integer():
        cell = int(cell)                        # a parquet/JSON 1.0 is the label 1
    return str(cell).strip()


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _label(row, col: str, values: dict) -> str:
    cell = row.need(col, (str, int, float))
    text = _cell_text(cell)
    if text in values:
        return values[text]
    if _is_number(text):                        # a CSV "1.0" or "+1" is the value 1
        for value, label in values.items():
            if _is_number(value) and float(value) == float(text):
                return label
    if text.lower() in LABELS:
        return LABELS[text.lower()]
    if values:
        raise row.error(f"label {text!r} is not one of --label-values {','.join(values)} nor a, b, tie, "
                        "model_a, model_b", col)
    if _is_number(text):
        raise row.error(f"label {text!r} is a number, whose meaning differs between datasets (0/1 is a/b in "
                        "one, tie/a in another): say what the values mean with --label-values A,B[,TIE], "
                        "e.g. --label-values 0,1 when 0 means response a is better", col)
    raise row.error(f"label {text!r} is not one of a, b, tie, model_a, model_b (any case); other values "
                    "need --label-values A,B[,TIE]", col)


def _text(row, col: str) -> str:
    """A cell used as id, subset or category: text or an integer, not blank (the pairs reader refuses it)."""
    text = str(row.need(col, (str, int)))
    if not text.strip():
        raise row.error("blank cell: an id, subset or category must not be empty", col)
    return text


def _question(row, col: str):
    cell = row.obj.get(col)
    if isinstance(cell, list):
        turns = tuple(from_messages(cell, row=row, field=col))
        return turns[0][1] if len(turns) == 1 else turns
    return row.need(col)


def _builder(opts):
    values = label_values(getattr(opts, "label_values", None))

    def build(row):
        from baer_fast.io.records import Pair

        pid = _text(row, opts.id_col) if opts.id_col else f"{file_stem(row.path)}-{row.line}"
        fields = {"subset": _text(row, opts.subset_col) if opts.subset_col else "default",
                  "category": _text(row, opts.category_col) if opts.category_col else None}
        question = _question(row, opts.question_col)
        if opts.chosen_col:
            return chosen_rejected_pair(pid, question, row.need(opts.chosen_col), row.need(opts.rejected_col),
                                        **fields)
        label = _label(row, opts.label_col, values)
        return Pair(pid, question, row.need(opts.a_col), row.need(opts.b_col), label=label, **fields)
    return build


def load(src: str, *, rejects=None, options=None) -> Imported:
    _check(options)
    pairs, dropped = convert(rows(src, rejects), _builder(options), rejects)
    out = Imported(pairs, dropped=dropped)
    out.notes.append(summary("table", pairs))
    return out
