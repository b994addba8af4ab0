"""Errors a user can act on: every bad input names its file, line and field.

Nothing here knows about formats; readers raise `InputError` with the location
they know, and the CLI prints `str(err)` as one line and exits non-zero.
"""
from __future__ import annotations

import contextlib


class BaerError(Exception):
    """Base class for errors the CLI reports as one line (no traceback)."""


class InputError(BaerError):
    """Bad user input, located as precisely as the reader can: file:line: field: message."""

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None,
                 field: str | None = None):
        self.message, self.path, self.line, self.field = message, path, line, field
        super().__init__(self._format())

    def _format(self) -> str:
        where = ""
        if self.path is not None:
            where = f"{self.path}:{self.line}: " if self.line is not None else f"{self.path}: "
        field = f"field '{self.field}': " if self.field else ""
        return f"{where}{field}{self.message}"


class PromptTooLong(InputError):
    """A pair whose prompt does not fit the judge's context window. The message ends with how to
    fix it, in the caller's terms (`pass --truncate` on the command line; `with_fix` rewords it for
    the Python API and the server). The whole pair is too long, so no one field is named."""

    def __init__(self, what: str, *, pair_id: str | None = None, fix: str = "pass --truncate",
                 where: str | None = None, field: str | None = None):
        """where: how the caller names the pair (default: its id, quoted)."""
        self.what, self.pair_id, self.fix, self.where = what, pair_id, fix, where
        name = where if where is not None else (None if pair_id is None else repr(pair_id))
        super().__init__(("" if name is None else f"pair {name}: ") + f"{what}; shorten the question or "
                         f"responses, or {fix} to cut both sides alike (baer-fast never truncates one side)",
                         field=field)

    def with_fix(self, fix: str, *, where: str | None = None) -> "PromptTooLong":
        return PromptTooLong(self.what, pair_id=self.pair_id, fix=fix, where=where or self.where, field=self.field)


class OutputError(InputError):
    """An output that could not be written (disk full, quota): located like an input, and saying what
    of the output is kept."""


class ArtifactError(BaerError):
    """A head artifact that cannot be trusted: wrong schema, tampered, or unpicklable format."""


@contextlib.contextmanager
def located(paths):
    """Name `paths` (the input files) in an InputError raised without a file: a fit that finds too few
    labelled rows or no usable expert is about the signals it was given (an option's error keeps no file)."""
    try:
        yield
    except InputError as e:
        if e.path is not None or type(e) is not InputError or (e.field or "").startswith("--"):
            raise
        raise InputError(e.message, path=",".join(paths), field=e.field) from None
