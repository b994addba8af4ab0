"""Progress of long commands on stderr: a tqdm bar on a terminal, periodic log lines otherwise.

One helper for every command (score, experts, ...):

    with progress(len(todo), desc="score", quiet=args.quiet, initial=n_done) as bar:
        for batch in batches:
            ...; bar.update(len(batch))

On a TTY the bar shows count, rate (pairs/s) and ETA. When stderr is not a terminal
(logs, CI) it writes one line every `every_s` seconds or `every_frac` of the total,
plus a last line at the end. `delay` seconds pass before anything shows (tqdm's name): work
that ends sooner prints nothing. `quiet=True` shows nothing. Results never go here.
"""
from __future__ import annotations

import sys
import time

PROGRESS_EVERY_S = 10.0      # seconds between log lines when stderr is not a terminal
PROGRESS_EVERY_FRAC = 0.10   # ...or every 10% of the total, whichever comes first


class _Silent:
    postfix = ""

    def update(self, n: int = 1) -> None:
        pass

    def set_postfix_str(self, s: str) -> None:
        """Extra live figures (tqdm's name), e.g. tokens/s; shown at the end of log lines."""
        self.postfix = s

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


class _LogLines(_Silent):
    """Non-terminal progress: a plain line now and then, 'desc: n/total unit (x%), r unit/s, ETA t'."""

    def __init__(self, total: int, *, desc: str, unit: str, initial: int, stream, every_s: float,
                 every_frac: float, delay: float = 0.0):
        self.total, self.desc, self.unit, self.stream = total, desc, unit, stream
        self.n = self._n0 = initial
        self.every_s, self.step, self.delay = every_s, max(1, int(total * every_frac)), delay
        self._t0 = self._t_last = time.monotonic()
        self._n_last = initial
        self._closed, self.shown = False, False

    def update(self, n: int = 1) -> None:
        self.n += n
        now = time.monotonic()
        if now - self._t0 < self.delay:
            return
        if now - self._t_last >= self.every_s or self.n - self._n_last >= self.step or (self.delay and not self.shown):
            self._emit(now)

    def _emit(self, now: float) -> None:
        rate = (self.n - self._n0) / max(now - self._t0, 1e-9)
        pct = f" ({100 * self.n / self.total:.0f}%)" if self.total else ""
        left = max(self.total - self.n, 0)
        eta = f", ETA {format_seconds(left / rate)}" if rate > 0 and left else ""
        extra = f", {self.postfix}" if self.postfix else ""
        speed = f"{rate:.1f} {self.unit}s/s" if rate >= 1 or rate == 0 else f"{1 / rate:.1f} s/{self.unit}"  # as tqdm
        print(f"{self.desc}: {self.n}/{self.total} {self.unit}s{pct}, {speed}{eta}{extra}",
              file=self.stream, flush=True)
        self._t_last, self._n_last, self.shown = now, self.n, True

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            if (self.n != self._n_last or self.n == self._n0) and (self.shown or not self.delay):
                self._emit(time.monotonic())


def format_seconds(s: float) -> str:
    s = int(round(s))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


def progress(total: int, *, desc: str, quiet: bool = False, unit: str = "pair", initial: int = 0,
             stream=None, every_s: float = PROGRESS_EVERY_S, every_frac: float = PROGRESS_EVERY_FRAC,
             delay: float = 0.0):
    """A progress reporter with `update(n)` and `close()` (also a context manager)."""
    stream = sys.stderr if stream is None else stream
    if quiet:
        return _Silent()
    isatty = getattr(stream, "isatty", None)
    if isatty is not None and isatty():
        from tqdm import tqdm

        return tqdm(total=total, initial=initial, desc=desc, unit=unit, file=stream, dynamic_ncols=True, delay=delay)
    return _LogLines(total, desc=desc, unit=unit, initial=initial, stream=stream, every_s=every_s,
                     every_frac=every_frac, delay=delay)
