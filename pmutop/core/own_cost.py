"""pmutop's own cost, for it to show: the CPU time all its threads used as a percentage of one core since the
last look, its resident memory, and at the end of a run its CPU time and peak RSS. Cheap: the process CPU
clock and one read of /proc/self/statm, at most once per interval."""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Callable
from typing import Protocol

MIB = 2**20


class OwnCostMeter(Protocol):
    """What the live view asks for its status line (None: nothing to show yet, or no meter)."""

    def text(self) -> str | None: ...


def rss_bytes() -> int:
    """Resident set size now: statm's second field, in pages (proc(5)); the peak where /proc is absent."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return peak_rss_bytes()


def peak_rss_bytes() -> int:
    """The highest RSS of the run so far (getrusage(2): ru_maxrss in KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class ProcessCost:
    """This process's CPU % (of one core; all threads) over the time since the last reading, and its RSS.
    A reading within `period` of the last one repeats it, so a screen refreshed more often than once an
    interval costs nothing more."""

    def __init__(
        self,
        period: float = 0.9,
        clock: Callable[[], float] = time.monotonic,
        cpu_clock: Callable[[], float] = time.process_time,
        rss: Callable[[], int] = rss_bytes,
    ) -> None:
        self._period = period
        self._clock, self._cpu_clock, self._rss = clock, cpu_clock, rss
        self._at, self._cpu = clock(), cpu_clock()
        self._text: str | None = None

    def text(self) -> str | None:
        now = self._clock()
        if now - self._at < self._period or now <= self._at:
            return self._text
        cpu = self._cpu_clock()
        percent = 100 * (cpu - self._cpu) / (now - self._at)
        self._at, self._cpu = now, cpu
        self._text = f"pmutop {percent:.1f}% CPU {self._rss() / MIB:.0f} MiB"
        return self._text


def process_age_s() -> float | None:
    """Seconds since this process started: boot time now less its start time (proc(5): /proc/self/stat
    field 22, in clock ticks since boot); None where /proc is absent."""
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()  # after the command name, which may hold spaces
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22 is the 20th after the name
        return time.clock_gettime(time.CLOCK_BOOTTIME) - started
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def final_line(elapsed_s: float | None = None) -> str:
    """The run's own cost in one line: CPU time (all threads), its share of one core over the process's
    life (`elapsed_s`, default its age), peak RSS."""
    elapsed_s = process_age_s() if elapsed_s is None else elapsed_s
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu = usage.ru_utime + usage.ru_stime
    wall = f" in {elapsed_s:.1f} s ({100 * cpu / elapsed_s:.1f}% of one core)" if elapsed_s else ""
    return f"own cost: {cpu:.2f} s CPU{wall}, peak RSS {peak_rss_bytes() / MIB:.0f} MiB"
