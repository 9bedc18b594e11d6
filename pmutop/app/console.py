"""The one way pmutop talks on stderr, and whether a stream is a terminal."""

from __future__ import annotations

import sys

PROG = "pmutop"
NEEDS_TERMINAL = "the live view needs a terminal on stdin and stderr; use --batch for pipes and files"
REPORT_HINT = "this is a bug in pmutop: please report it to the pmutop issue tracker with the output of PMUTOP_DEBUG=1"


def say(message: str) -> None:
    print(f"{PROG}: {message}", file=sys.stderr, flush=True)


def warn(message: str) -> None:
    say(f"warning: {message}")


def isatty(stream: object) -> bool:
    try:
        return stream is not None and stream.isatty()  # type: ignore[attr-defined]
    except (ValueError, OSError):  # closed
        return False


def has_terminal() -> bool:
    """Textual draws on stderr and reads stdin: the live view needs both to be a terminal."""
    return isatty(sys.stdin) and isatty(sys.stderr)
