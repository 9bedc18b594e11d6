"""`python -m pmutop` and the `pmutop` command. Ctrl-C before pmutop's own exit guard is in place (during the
imports, which take a few hundred milliseconds) ends in one line and status 130, never a traceback: nothing
has been touched yet, so there is nothing to put back."""

import os
import signal
import sys


def _interrupted_during_start_up(signum: int, frame: object) -> None:
    os.write(2, b"pmutop: interrupted\n")
    os._exit(128 + signum)


def entry() -> int:
    previous = signal.signal(signal.SIGINT, _interrupted_during_start_up)
    from pmutop.app.main import main

    signal.signal(signal.SIGINT, previous)  # from here the exit guard owns every terminating signal
    return main()


if __name__ == "__main__":
    sys.exit(entry())
