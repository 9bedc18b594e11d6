"""Per-CPU busy fraction from the kernel's CPU times (psutil): utilisation where no ref cycles exist."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import psutil

IDLE_FIELDS = ("idle", "iowait")
# guest/guest_nice are already inside user/nice in /proc/stat, so they are not added again.
BUSY_FIELDS = ("user", "nice", "system", "irq", "softirq", "steal")


class CpuBusy:
    """Busy / total time of each CPU between calls. psutil lists online CPUs in number order.

    The samplers of all CPUs share one read of /proc/stat per interval: the first CPU to ask again after
    using the current snapshot takes a new one, the others use it. O(N) per interval for N CPUs."""

    def __init__(self, online: Sequence[int], cpu_times: Callable[..., list[Any]] | None = None) -> None:
        self._online = list(online)
        self._cpu_times = cpu_times or psutil.cpu_times
        self._prev: dict[int, tuple[float, float]] = {}
        self._lock = threading.Lock()  # the samplers of all CPUs call busy() from their own threads
        self._snapshot: dict[int, tuple[float, float]] = {}
        self._generation = 0
        self._used: dict[int, int] = {}  # cpu -> the snapshot generation it last used

    def _totals(self) -> dict[int, tuple[float, float]]:
        rows = self._cpu_times(percpu=True)
        if len(rows) != len(self._online):  # a CPU went on/offline: positions no longer match
            return {}
        out = {}
        for cpu, t in zip(self._online, rows, strict=True):
            busy = sum(getattr(t, f, 0.0) for f in BUSY_FIELDS)
            idle = sum(getattr(t, f, 0.0) for f in IDLE_FIELDS)
            out[cpu] = (busy, busy + idle)
        return out

    def busy(self, cpu: int) -> float | None:
        """Fraction of time `cpu` was busy since the previous call for it (None on the first call)."""
        with self._lock:
            if self._generation == 0 or self._used.get(cpu) == self._generation:
                self._snapshot = self._totals()
                self._generation += 1
            self._used[cpu] = self._generation
            now = self._snapshot.get(cpu)
        prev = self._prev.get(cpu)
        if now is None:
            return None
        self._prev[cpu] = now
        if prev is None or now[1] <= prev[1]:
            return None
        return min(1.0, max(0.0, (now[0] - prev[0]) / (now[1] - prev[1])))
