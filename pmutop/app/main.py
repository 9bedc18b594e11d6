"""Command line: `pmutop [options]` (live view or --batch), `pmutop info`, `pmutop events`, `pmutop restore`,
`pmutop selftest`, `pmutop serve`, `pmutop replay`, `pmutop diff`.

Every failure ends in one line on stderr and a non-zero status: 2 for bad input, 3 when the PMU is
in use by someone else, 4 when something could not be put back, 5 when `pmutop selftest` finds no usable
PMU, 1 for anything else (and a failed self-test check), 128+N when stopped by signal N.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Sequence

from pmutop.app.console import REPORT_HINT, say
from pmutop.app.live_view import LIVE_VIEW_RAN
from pmutop.core.errors import PmutopError, UsageError
from pmutop.safety.exit_guard import ExitGuard


def _dispatch(argv: list[str], guard: ExitGuard) -> int:
    """The command named by the first word (each imported only when run: start-up stays short)."""
    command, rest = (argv[0], argv[1:]) if argv else (None, [])
    if command == "events":
        from pmutop.app.commands.events import events_main

        print(events_main(rest), flush=True)
        return 0
    if command == "info":
        from pmutop.app.commands.info import info_main

        return info_main(rest)
    if command == "restore":
        from pmutop.app.commands.restore import run_restore

        return run_restore(rest)
    if command == "selftest":
        from pmutop.app.commands.selftest import selftest_main

        return selftest_main(rest, guard)
    if command == "replay":
        from pmutop.app.commands.replay import run_replay

        return run_replay(rest, guard)
    if command == "diff":
        from pmutop.app.commands.diff import run_diff

        return run_diff(rest)
    from pmutop.app.commands.run import run
    from pmutop.app.options import run_parser

    if command == "serve":
        return run(run_parser(serve=True).parse_args(rest), argv, guard)
    options, measured = split_command(argv)
    from pmutop.app.usage import main_parser

    args = main_parser().parse_args(options)
    args.command = measured
    return run(args, argv, guard)


def split_command(argv: list[str]) -> tuple[list[str], list[str] | None]:
    """`pmutop [options] -- COMMAND [ARGS]`: the options, and the command to start and count (None: none).
    Split here, not by argparse, so the command's own options are never read as pmutop's."""
    if "--" not in argv:
        return argv, None
    at = argv.index("--")
    if at + 1 == len(argv):
        raise UsageError("-- needs a command to start, e.g. pmutop -- make -j8")
    return argv[:at], argv[at + 1 :]


def main(argv: Sequence[str] | None = None) -> int:
    code = _guarded_main(list(sys.argv[1:] if argv is None else argv))
    if LIVE_VIEW_RAN.is_set():
        # Everything that matters is done (PMU restored, terminal back, messages written); tearing down
        # the interpreter's Textual objects would add ~0.2 s before the shell returns. Quitting must feel
        # instant.
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                if stream is not None:
                    stream.flush()
        os._exit(code)
    return code


def _silence_stdout() -> None:
    """stdout is unusable (reader gone, disk full): point it at /dev/null so nothing more fails on exit."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def _guarded_main(argv: list[str]) -> int:
    guard = ExitGuard(say)
    guard.install()  # before any other thread starts: every thread inherits the blocked signals
    try:
        code = _dispatch(argv, guard)
        if sys.stdout is not None:
            sys.stdout.flush()
        return code
    except PmutopError as e:
        say(str(e))
        return e.exit_code
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly; stdout is unusable now.
        _silence_stdout()
        return 0
    except OSError as e:
        if e.errno is not None and getattr(e, "filename", None) is None:
            _silence_stdout()
            say(f"cannot write the output: {e.strerror or e}")
            return 1
        say(f"{e.filename}: {e.strerror or e}" if e.filename else f"{e.strerror or e}")
        return 1
    except Exception as e:  # a bug: still one line (PMUTOP_DEBUG=1 shows the traceback)
        if os.environ.get("PMUTOP_DEBUG"):
            raise
        say(f"internal error: {e} ({REPORT_HINT})")
        return 1
    finally:
        guard.uninstall()
