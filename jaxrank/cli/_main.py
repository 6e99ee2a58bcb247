"""``jaxrank``'s entry point: parse the command line, run the command, and turn errors and
warnings into one line each on stderr with the exit code (:mod:`jaxrank.cli` describes them)."""

from __future__ import annotations

import sys
import warnings

from jaxrank import _cache
from jaxrank.cli._commands import demo
from jaxrank.cli._common import UsageError, one_line
from jaxrank.cli._parser import build_parser

__all__ = ["main"]


def main(argv=None) -> int:
    """Entry point of the ``jaxrank`` console script; returns the exit code.

    Example:
      >>> from jaxrank.cli import main
      >>> main(["--help"])  # doctest: +ELLIPSIS
      usage: jaxrank ...
      0
    """
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
    try:
        args = parser.parse_args(argv)
    except UsageError as err:
        print(f"jaxrank: error: {one_line(err)}", file=sys.stderr)
        return 2
    except SystemExit as exit_:  # --help
        return exit_.code if isinstance(exit_.code, int) else 0
    if args.command is None:  # a bare `jaxrank`: what can it do (the demo takes 15 s)
        parser.print_help()
        return 0
    _cache.enable_default_cache()  # the persistent cache for command-line users (module notes)
    debug = getattr(args, "debug", False)
    try:
        with warnings.catch_warnings():
            # any warning not collected below (the demo's) prints as one line, not Python's
            # two-line "file:line: Category: message" plus the source line; restored on exit
            warnings.showwarning = _show_warning
            if args.command == "demo":
                demo(trials=args.trials, t=args.overlap, rho=args.rho, seed=args.seed)
                return 0
            with warnings.catch_warnings(record=True) as caught:
                from jaxrank.model import ConvergenceWarning

                warnings.simplefilter("always", ConvergenceWarning)
                code = args.func(args)
            _report_warnings(caught, quiet=getattr(args, "quiet", False))
            return code
    except KeyboardInterrupt:
        print("jaxrank: interrupted", file=sys.stderr)
        return 130
    except Exception as err:
        if debug:
            raise
        if isinstance(err, OSError) and err.strerror and err.filename:
            message, code = f"{err.strerror}: {err.filename}", 2
        elif isinstance(err, ValueError | OSError | ImportError):
            message, code = str(err), 2
        else:
            message = (f"internal error ({type(err).__name__}: {err}); "
                       "rerun with --debug for the traceback")  # fmt: skip
            code = 1
        print(f"jaxrank: error: {one_line(message)}", file=sys.stderr)
        return code


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """``warnings.showwarning`` inside :func:`main`: ``jaxrank: warning: Category: message``."""
    stream = sys.stderr if file is None else file
    try:
        stream.write(f"jaxrank: warning: {category.__name__}: {one_line(message)}\n")
    except (OSError, ValueError):  # a closed stream, as Python's own showwarning tolerates
        pass


def _report_warnings(caught, *, quiet: bool, limit: int = 3) -> None:
    """Each distinct warning as one ``jaxrank: warning:`` line (at most ``limit``)."""
    if quiet:
        return
    seen = list(dict.fromkeys(one_line(w.message) for w in caught))
    for message in seen[:limit]:
        print(f"jaxrank: warning: {message}", file=sys.stderr)
    if len(seen) > limit:
        print(f"jaxrank: warning: ... and {len(seen) - limit} more", file=sys.stderr)
