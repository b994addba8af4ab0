"""Errors a user can act on: every bad input names its file, line and field.

Nothing here knows about formats; readers raise `InputError` with the location
they know, and the CLI prints `str(err)` as one line and exits non-zero.
"""
from __future__ import annotations


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
    fix it, naming the caller's option (`--truncate` on the command line; `with_option` rewords it
    for callers that spell it otherwise, e.g. the Python API)."""

    def __init__(self, what: str, *, option: str = "--truncate", field: str | None = "response_a"):
        self.what, self.option = what, option
        super().__init__(f"{what}; shorten the question or responses, or pass {option} to cut both "
                         "sides alike (baer-fast never truncates one side)", field=field)

    def with_option(self, option: str) -> "PromptTooLong":
        return PromptTooLong(self.what, option=option, field=self.field)


class ArtifactError(BaerError):
    """A head artifact that cannot be trusted: wrong schema, tampered, or unpicklable format."""
