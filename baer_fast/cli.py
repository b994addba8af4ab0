"""Command line: thin wiring. Parses arguments, imports the one subcommand it runs, and
turns `BaerError`s into one-line messages with a non-zero exit. Heavy imports (torch,
sklearn) happen inside the subcommand modules, after parsing.

Each subcommand lives in `baer_fast/commands/<module>.py` with
`add_arguments(parser)` and `run(args) -> int`; its one-line help is in COMMANDS.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import contextlib
import logging
import signal
import sys
import threading

# name -> module under baer_fast.commands (imported only when that command runs, except for
# --help of the command itself, which needs its arguments)
COMMANDS = {
    "import": ("import_", "convert published judge outputs or preference datasets to pairs (+ signals)"),
    "check": ("check", "load a local judge model and report whether and how it runs, before a long job"),
    "experts": ("experts", "run the expert bank of a local judge model on pairs -> signals"),
    "fit": ("fit", "fit the heads of one condition on its signals and freeze one to an artifact"),
    "frontier": ("frontier", "cross-validated accuracy vs cost of the expert subsets a budget search visits"),
    "score": ("score", "score pairs with a frozen head -> scores.jsonl"),
    "eval": ("eval", "accuracy, coverage, McNemar and oracle of scores vs. single experts"),
    "serve": ("serve", "serve a judge over HTTP for RLHF (batched, authenticated): POST /v1/judge, /get_reward"),
    "demo": ("demo", "import -> fit -> score -> eval on the LLMBar sample shipped in the package"),
}

EXIT_INPUT = 2      # bad input, bad artifact, bad arguments
EXIT_INTERNAL = 1   # a bug: the traceback is printed


RESUMABLE = ("experts", "score")   # their outputs are kept as they go: a rerun resumes


class Terminated(KeyboardInterrupt):
    """SIGTERM (a cluster's time limit, `kill`), raised where Python is, like Ctrl-C: open outputs are
    closed, engines stopped and the lock files let go, and the run says it was stopped."""


def _terminate(signum, frame):
    raise Terminated


@contextlib.contextmanager
def _sigterm_raises(command: str, entry: bool):
    """SIGTERM -> Terminated while a command runs, where main() is the process's entry point (the
    console script, `python -m baer_fast.cli`: argv from sys.argv). Not for serve (its server handles
    SIGTERM), nor where a program calls main(argv) in its own process (SIGTERM stays its to handle:
    it would otherwise go on after main returned 143), nor where a handler is set already."""
    own = (entry and command != "serve" and threading.current_thread() is threading.main_thread()
           and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)
    if own:
        signal.signal(signal.SIGTERM, _terminate)
    try:
        yield
    finally:
        if own:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


@contextlib.contextmanager
def _libraries_quiet(quiet: bool):
    """-q: no progress bars from transformers / huggingface_hub either (weight loading), for the run."""
    import os
    if not quiet:
        yield
        return
    env = os.environ.get("HF_HUB_DISABLE_PROGRESS_BARS")
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"        # read where transformers is first imported
    tf = sys.modules.get("transformers.utils.logging")
    was = tf.is_progress_bar_enabled() if tf else None
    if tf:
        tf.disable_progress_bar()
    try:
        yield
    finally:
        if env is None:
            os.environ.pop("HF_HUB_DISABLE_PROGRESS_BARS", None)
        else:
            os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = env
        tf = sys.modules.get("transformers.utils.logging")
        if tf and was is not False and env is None:          # imported during the run, or enabled before
            tf.enable_progress_bar()


def _stopped(args, e: KeyboardInterrupt) -> int:
    what, code = ("terminated (SIGTERM)", 143) if isinstance(e, Terminated) else ("interrupted", 130)
    again = "it without --overwrite" if getattr(args, "overwrite", False) else "the same command"
    hint = f": what was written is kept, and rerunning {again} resumes from it" if args.command in RESUMABLE else ""
    print(what + hint, file=sys.stderr)
    return code


def _load(name: str):
    return importlib.import_module(f"baer_fast.commands.{COMMANDS[name][0]}")


def _available(name: str) -> bool:
    return importlib.util.find_spec(f"baer_fast.commands.{COMMANDS[name][0]}") is not None


class _Parser(argparse.ArgumentParser):
    """Argument errors as one line (like every other error), exit 2."""

    def error(self, message: str):
        self.exit(EXIT_INPUT, f"error: {self.prog}: {message} (see {self.prog} --help)\n")


def build_parser(argv: list[str]) -> argparse.ArgumentParser:
    parser = _Parser(prog="baer-fast", description="Robust pairwise LLM judging (BAER).")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bars, warnings only")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    wanted = next((a for a in argv if a in COMMANDS), None)
    for name, (_, help_text) in COMMANDS.items():
        if not _available(name):
            continue      # command not built in this version
        p = sub.add_parser(name, help=help_text, description=help_text)
        # also accepted after the command; SUPPRESS keeps the global value when absent
        p.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS,
                       help="no progress bars, warnings only")
        if name == wanted:
            _load(name).add_arguments(p)
    return parser


def main(argv: list[str] | None = None) -> int:
    entry = argv is None                  # the console script or `python -m`: the process is ours
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv)
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:     # --help (0) or a bad argument (2): returned, like every other exit
        return e.code if isinstance(e.code, int) else EXIT_INPUT
    if args.version:
        from baer_fast import __version__
        print(__version__)
        return 0
    if not args.command:
        parser.print_help(sys.stderr)
        return EXIT_INPUT
    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO,
                        format="baer-fast: %(message)s", stream=sys.stderr)
    from baer_fast.errors import BaerError
    try:
        from baer_fast.io.jsonl import check_not_an_input
        check_not_an_input(args)
        from baer_fast.io.resumable import warn_unfinished_inputs
        warn_unfinished_inputs(args)
        with _sigterm_raises(args.command, entry), _libraries_quiet(args.quiet):
            return int(_load(args.command).run(args) or 0)
    except BaerError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_INPUT
    except KeyboardInterrupt as e:
        return _stopped(args, e)
    except BrokenPipeError:         # stdout closed early (e.g. `| head`): not an error of ours
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
