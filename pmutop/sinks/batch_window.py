"""`pmutop --prometheus URL --batch --since T [--until T]`: a past window out of the server's history, printed
as a live batch run prints its intervals (the same printers and records)."""

from __future__ import annotations

import io
import sys
from collections.abc import Callable, Iterable
from typing import IO

from pmutop.core.sample import Sample
from pmutop.sinks.batch import PRINTERS, Hosts, print_interval


def print_rounds(
    rounds: Iterable[tuple[float, list[Sample]]],
    fmt: str,
    keys: list[str],
    mode: str,
    *,
    tma: bool = False,
    hosts: Hosts | None = None,
    wall0: float | None = None,
    count: int | None = None,
    out: IO[str] | None = None,
    warn: Callable[[str], None] | None = None,
    after_round: Callable[[], object] | None = None,
) -> int:
    """Print each round (Unix time, its samples); returns how many. `wall0`: the window's start, for
    --timestamps; `after_round`: called after each (the recorder's drain, so the rings never overrun it)."""
    out = out or sys.stdout
    buf = io.StringIO()
    printer = PRINTERS[fmt](buf, keys, mode, tma, wall0 is not None, hosts)
    warned: set[tuple[int, str]] = set()
    done = 0
    for _, batch in rounds:
        if count is not None and done >= count:
            break
        if batch:
            print_interval(printer, batch, done + 1, wall0, warn, warned)
            done += 1
        out.write(buf.getvalue())
        buf.seek(0)
        buf.truncate()
        if after_round is not None:
            after_round()
    out.flush()
    return done
