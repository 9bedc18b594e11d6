"""`python -m pmutop` and the `pmutop` command. Ctrl-C before pmutop's own exit guard is in place (during the
imports, which take a few hundred milliseconds) ends in one line and status 130, never a traceback: nothing
has been touched yet, so there is nothing to put back."""

# The interpreter's C-level signal module, not `signal`: the standard module's own import builds enums
# (milliseconds under load), and a Ctrl-C during it would end in a traceback.
import _signal  # type: ignore[import-not-found]  # (no stubs: it is `signal` without the enums)
import os


def _interrupted_during_start_up(signum: int, frame: object) -> None:
    os.write(2, b"pmutop: interrupted\n")
    os._exit(128 + signum)


def entry() -> int:
    previous = _signal.signal(_signal.SIGINT, _interrupted_during_start_up)
    from pmutop.app.main import main

    _signal.signal(_signal.SIGINT, previous)  # from here the exit guard owns every terminating signal
    return main()


if __name__ == "__main__":
    raise SystemExit(entry())
