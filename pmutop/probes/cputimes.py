"""Per-CPU busy fraction from the kernel's CPU times (psutil): utilisation where no ref cycles exist."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

IDLE_FIELDS = ("idle", "iowait")
# guest/guest_nice are already inside user/nice in /proc/stat, so they are not added again.
BUSY_FIELDS = ("user", "nice", "system", "irq", "softirq", "steal")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def stat_rows(text: bytes) -> list[tuple[float, float]]:
    """(busy, busy + idle) seconds of each `cpuN` line of /proc/stat, in file order. The arithmetic is
    psutil.cpu_times(percpu=True)'s (ticks / CLK_TCK, fields added in BUSY_FIELDS order), so the fractions
    are the same to the last bit; fields an old kernel does not have count as 0."""
    rows: list[tuple[float, float]] = []
    # The cpu lines come first, together: only they are split (the next, intr, can be very long).
    start = text.find(b"\ncpu") + 1  # past the all-CPU total
    end = text.find(b"\n", text.rfind(b"\ncpu") + 1)
    c = CLOCK_TICKS
    for line in text[start : len(text) if end == -1 else end].split(b"\n"):
        v = line.split()
        if not v or not v[0].startswith(b"cpu"):
            continue
        # user nice system idle iowait irq softirq steal [guest guest_nice]; an old kernel's missing ones are 0
        if len(v) < 9:
            v = v + [b"0"] * (9 - len(v))
        # BUSY_FIELDS, left to right like sum(); named, not a list per line (this runs every interval)
        busy = float(v[1]) / c + float(v[2]) / c + float(v[3]) / c + float(v[6]) / c + float(v[7]) / c + float(v[8]) / c
        rows.append((busy, busy + (float(v[4]) / c + float(v[5]) / c)))
    return rows


class ProcStat:
    """/proc/stat kept open and read with one pread() per call (no open, parse of all lines, or objects
    per CPU per interval: batch mode reads it every interval)."""

    def __init__(self, path: str = "/proc/stat") -> None:
        self._path = path
        self._fd: int | None = None
        self._size = 8192  # grows until the cpu lines fit

    def read(self) -> bytes:
        if self._fd is None:
            self._fd = os.open(self._path, os.O_RDONLY | os.O_CLOEXEC)
        while True:
            data = os.pread(self._fd, self._size, 0)
            if len(data) < self._size:
                return data  # the whole file
            end = data.find(b"\n", data.rfind(b"\ncpu") + 1)
            if end != -1 and len(data) - end > 3:
                return data  # the last cpu line is whole, and 3 bytes of the next are not "cpu"
            self._size *= 2

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


class CpuBusy:
    """Busy / total time of each CPU between calls. psutil lists online CPUs in number order.

    The samplers of all CPUs share one read of /proc/stat per interval: the first CPU to ask again after
    using the current snapshot takes a new one, the others use it. O(N) per interval for N CPUs."""

    def __init__(self, online: Sequence[int], cpu_times: Callable[..., list[Any]] | None = None) -> None:
        """`cpu_times`: psutil.cpu_times's shape, for tests; by default /proc/stat is read directly."""
        self._online = list(online)
        self._cpu_times = cpu_times
        self._stat = ProcStat() if cpu_times is None else None
        self._prev: dict[int, tuple[float, float]] = {}
        self._lock = threading.Lock()  # the samplers of all CPUs call busy() from their own threads
        self._index = {cpu: i for i, cpu in enumerate(self._online)}  # cpu -> its row
        self._snapshot: list[tuple[float, float]] = []  # the rows of the last read (empty: CPUs changed)
        self._generation = 0
        self._used: dict[int, int] = {}  # cpu -> the snapshot generation it last used

    def _given_rows(self) -> list[tuple[float, float]]:
        assert self._cpu_times is not None
        rows = []
        for t in self._cpu_times(percpu=True):
            busy = sum(getattr(t, f, 0.0) for f in BUSY_FIELDS)
            rows.append((busy, busy + sum(getattr(t, f, 0.0) for f in IDLE_FIELDS)))
        return rows

    def _totals(self) -> list[tuple[float, float]]:
        rows = stat_rows(self._stat.read()) if self._stat is not None else self._given_rows()
        # A CPU went on/offline: positions no longer match (no CPU has a row then).
        return rows if len(rows) == len(self._online) else []

    def close(self) -> None:
        if self._stat is not None:
            self._stat.close()

    def busy(self, cpu: int) -> float | None:
        """Fraction of time `cpu` was busy since the previous call for it (None on the first call)."""
        self._lock.acquire()  # acquire/release, not `with`: a little less to run for every CPU every interval
        try:
            if self._generation == 0 or self._used.get(cpu) == self._generation:
                self._snapshot = self._totals()
                self._generation += 1
            self._used[cpu] = self._generation
            snapshot = self._snapshot
        finally:
            self._lock.release()
        i = self._index.get(cpu)
        if i is None or not snapshot:
            return None
        now = snapshot[i]
        prev = self._prev.get(cpu)
        self._prev[cpu] = now
        if prev is None or now[1] <= prev[1]:
            return None
        return min(1.0, max(0.0, (now[0] - prev[0]) / (now[1] - prev[1])))
