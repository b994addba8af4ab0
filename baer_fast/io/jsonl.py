"""JSONL reading with located errors, and writes that never leave a half-written file.

Readers yield `(line_number, dict)`; every failure is an `InputError` naming the
file and 1-based line (a `.gz` that is no gzip, is cut short or is a Git LFS pointer
included: `unreadable`). With a `Rejects` collector (the `--on-error skip` policy) a bad
line is recorded there and skipped instead of raised. Writers go to a temporary file
in the target's folder and are renamed into place only after everything was written
and fsync'd.
"""
from __future__ import annotations

import errno
import gzip
import json
import math
import os
import tempfile
import zlib
from contextlib import contextmanager
from typing import Any, Iterator, Protocol

from baer_fast.errors import InputError, OutputError


class RejectSink(Protocol):
    """Where a reader records a bad line instead of raising (io.rejects.Rejects is the one used)."""
    def add(self, err: InputError, raw: bytes | str | None = None) -> None: ...
    def __len__(self) -> int: ...


def _reject_constant(name: str) -> float:
    # json accepts NaN/Infinity by default; they are never valid in our formats.
    raise ValueError(f"non-finite number {name} is not allowed")


_decode = json.JSONDecoder(parse_constant=_reject_constant).decode


def _open_input(path: str):
    try:
        return gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")
    except FileNotFoundError:
        raise InputError("file not found", path=path) from None
    except IsADirectoryError:
        raise InputError("is a directory, expected a JSONL file", path=path) from None
    except OSError as e:
        raise InputError(f"cannot read: {e.strerror or e}", path=path) from None


# What reading a stored file can raise besides the text it holds: gzip.BadGzipFile (an OSError)
# for a .gz that is no gzip, EOFError for one cut short, zlib.error for damaged compressed data.
READ_ERRORS = (OSError, EOFError, zlib.error)
LFS_POINTER = b"version https://git-lfs.github.com/spec/"
_LFS = ("a Git LFS pointer file, not the data (the repository was cloned without git-lfs): "
        "run `git lfs install && git lfs pull` in the checkout, or download the file itself")


def lfs_pointer(path: str) -> InputError | None:
    """The error for a Git LFS pointer file (what a clone without git-lfs holds instead of the data),
    or None when `path` is not one."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(len(LFS_POINTER))
    except OSError:
        return None
    return InputError(_LFS, path=path) if head == LFS_POINTER else None


def unreadable(path: str, err: BaseException, *, line: int | None = None) -> InputError:
    """A located InputError for one of READ_ERRORS raised while reading `path` (`line`: where, if known)."""
    lfs = lfs_pointer(path)
    if lfs is not None:
        return lfs
    if isinstance(err, EOFError):
        return InputError("truncated gzip file: the compressed data ends early (an interrupted download "
                          "or copy?)", path=path, line=line)
    if isinstance(err, gzip.BadGzipFile):
        return InputError(f"named .gz but not a gzip file ({err})", path=path)
    if isinstance(err, zlib.error):
        return InputError(f"damaged gzip data ({err})", path=path, line=line)
    return InputError(f"cannot read: {getattr(err, 'strerror', None) or err}", path=path, line=line)


def _readline(fh, path: str, line_no: int) -> bytes:
    try:
        return fh.readline()
    except READ_ERRORS as e:
        raise unreadable(path, e, line=line_no) from None


def iter_jsonl_lines(path: str, rejects: "RejectSink | None" = None) -> Iterator[tuple[int, dict | None, bytes]]:
    """(line_no, object, raw line) for every non-blank line, an empty file included; with `rejects`
    a bad line is recorded there and given as None (for files matched to others by position)."""
    with _open_input(path) as fh:
        raw = _readline(fh, path, 1)
        line_no = 0
        while raw:
            line_no += 1
            nxt = _readline(fh, path, line_no + 1)
            try:
                obj = _parse_line(raw, path=path, line_no=line_no, last=not nxt)
            except InputError as err:
                if rejects is None:
                    raise
                rejects.add(err, raw)
                yield line_no, None, raw
            else:
                if obj is not None:
                    yield line_no, obj, raw
            raw = nxt


def iter_jsonl_raw(path: str, rejects: "RejectSink | None" = None) -> Iterator[tuple[int, dict, bytes]]:
    """Yield (line_no, object, raw line) per non-blank line.

    A bad line raises InputError, or, with `rejects`, is recorded there and skipped.
    A file with no record at all is always an error (nothing to work on).
    """
    n_records, n_before = 0, len(rejects) if rejects is not None else 0
    for line_no, obj, raw in iter_jsonl_lines(path, rejects):
        if obj is not None:
            n_records += 1
            yield line_no, obj, raw
    if n_records == 0:
        n_bad = len(rejects) - n_before if rejects is not None else 0
        extra = f" ({n_bad} line(s) rejected)" if n_bad else ""
        raise InputError(f"empty file: no valid JSON records{extra}", path=path)


def iter_jsonl(path: str, rejects: "RejectSink | None" = None) -> Iterator[tuple[int, dict]]:
    """Yield (line_no, object) for each non-blank line; raise InputError on any bad line."""
    for line_no, obj, _ in iter_jsonl_raw(path, rejects):
        yield line_no, obj


def _parse_line(raw: bytes, *, path: str, line_no: int, last: bool = False) -> dict | None:
    if line_no == 1 and raw.startswith(LFS_POINTER):
        raise InputError(_LFS, path=path)
    if line_no == 1 and raw.startswith(b"\xef\xbb\xbf"):
        raise InputError("file starts with a UTF-8 byte-order mark (BOM); save it without one",
                         path=path, line=line_no)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"not valid UTF-8 (byte {e.start})", path=path, line=line_no) from None
    if not text.strip():
        return None
    try:
        # one decoder for every line (json.loads builds one per call); json.loads only for its BOM message
        obj = _decode(text) if not text.startswith("\ufeff") else json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise InputError("malformed JSON: nested too deeply", path=path, line=line_no) from None
    except (json.JSONDecodeError, ValueError) as e:
        if last and not raw.endswith(b"\n"):
            raise InputError(f"truncated last line: no newline at the end and not valid JSON ({e}); "
                             "was the writer interrupted?", path=path, line=line_no) from None
        raise InputError(f"malformed JSON: {e}", path=path, line=line_no) from None
    if not isinstance(obj, dict):
        raise InputError(f"expected a JSON object, got {type(obj).__name__}", path=path, line=line_no)
    if may_hold_surrogate(raw):
        check_unicode(obj, path=path, line=line_no)
    return obj


def may_hold_surrogate(text: str | bytes) -> bool:
    """Whether parsed JSON `text` can hold an unpaired surrogate: only a \\uD800-\\uDFFF escape makes one
    (UTF-8 text cannot), so text without a `\\ud` / `\\uD` needs no walk of its strings."""
    if isinstance(text, bytes):
        return b"\\ud" in text or b"\\uD" in text
    return "\\ud" in text or "\\uD" in text


def check_unicode(obj: Any, *, path: str | None, line: int | None, field: str | None = None) -> None:
    """Raise a located InputError where a string of `obj` holds an unpaired UTF-16 surrogate: JSON
    allows the escape ("\\ud83d" alone, e.g. an emoji cut in half), but it is not text: no UTF-8
    file can hold it. (The in-process Judge, with no file to point at, replaces it with U+FFFD.)"""
    if isinstance(obj, str):
        try:
            obj.encode("utf-8")
        except UnicodeEncodeError as e:
            raise InputError(f"unpaired surrogate \\u{ord(obj[e.start]):04x} at character {e.start} "
                             "(half of a UTF-16 pair, e.g. a cut emoji): not valid text; fix or drop it",
                             path=path, line=line, field=field) from None
    elif isinstance(obj, dict):
        for k, v in obj.items():
            check_unicode(k, path=path, line=line, field=field)
            check_unicode(v, path=path, line=line, field=k if field is None else f"{field}.{k}")
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            check_unicode(v, path=path, line=line, field=f"{field}[{i}]" if field else f"[{i}]")


def dumps(obj: Any) -> str:
    """One canonical JSON line (sorted keys are NOT used: field order is part of the format)."""
    return json.dumps(obj, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def make_dir(path: str, *, field: str | None = None) -> None:
    """Create the output folder `path` (and its parents), or say why it cannot be one."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise InputError("exists and is not a folder", path=path, field=field)
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise InputError(f"cannot create this folder: {e.strerror or e}", path=path, field=field) from None


def check_output(path: str, *, field: str = "--out") -> None:
    """Before the work starts: `path` is no folder, and its folder exists (or is made) and can be
    written, so a long run does not end on an output it cannot write."""
    if os.path.isdir(path):
        raise InputError("is a directory, expected an output file path", path=path, field=field)
    folder = os.path.dirname(os.path.abspath(path))
    make_dir(folder, field=field)
    if not os.access(folder, os.W_OK):
        raise InputError("cannot write here: permission denied", path=folder, field=field)


def check_not_an_input(args, outputs=("out", "plot"),
                       inputs=("signals", "input", "head", "scores", "costs", "derived_params",
                               "transfer_from")) -> None:
    """An output flag that names the same file as an input flag (fit --out S --signals S, score
    --overwrite --out S) would destroy the input: refused before anything is read or written."""
    for o in outputs:
        out = getattr(args, o, None)
        if not isinstance(out, str) or not os.path.isfile(out):
            continue
        for i in inputs:
            vals = getattr(args, i, None)
            for v in vals if isinstance(vals, list) else [vals]:
                if isinstance(v, str) and os.path.isfile(v) and os.path.samefile(out, v):
                    flag = "--" + i.replace("_", "-")
                    raise InputError(f"is also {flag}: writing it would destroy that input; choose another path",
                                     path=out, field="--" + o)


@contextmanager
def atomic_open(path: str, mode: str = "w", *, sync_dir: bool = True):
    """Open a temp file beside `path`; on clean exit fsync and rename over `path`, else delete it.

    `sync_dir=False` skips the folder fsync that makes the rename itself durable: for files
    where finding the previous version after a power loss is safe (progress records).
    """
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise InputError("is a directory, expected a file path to write", path=path)
    make_dir(folder)
    try:
        fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=folder)
    except OSError as e:
        raise InputError(f"cannot write here: {e.strerror or e}", path=path) from None
    try:
        os.fchmod(fd, 0o666 & ~_umask())       # mkstemp makes 0600; outputs get the usual mode
        with os.fdopen(fd, mode, encoding=None if "b" in mode else "utf-8") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        if sync_dir:
            fsync_dir(folder)
    except BaseException as e:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(e, OSError) and e.errno in NO_ROOM:
            raise OutputError(f"cannot write: {e.strerror}; nothing was replaced", path=path) from e
        raise


NO_ROOM = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)     # a full disk or quota, a file-size limit


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def fsync_dir(folder: str) -> None:
    """Make a rename or a new file in `folder` durable (best effort where unsupported)."""
    try:
        dfd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


def write_jsonl(path: str, records) -> int:
    """Write all records atomically; return the count."""
    n = 0
    with atomic_open(path) as fh:
        for rec in records:
            fh.write(dumps(rec) + "\n")
            n += 1
    return n


def is_finite_number(x: Any) -> bool:
    if type(x) is float:        # the common case, first
        return math.isfinite(x)
    if not isinstance(x, (int, float)) or isinstance(x, bool):
        return False
    try:
        return math.isfinite(x)
    except OverflowError:       # an int too large for a float
        return False
