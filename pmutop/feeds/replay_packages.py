"""The memory views of a replay: a PackageFeed (pmutop.core.dram_reading) over the DRAM readings a recording
holds, filled by the replay feed as it pushes each interval (get it as `ReplayFeed.package_feed`: None for a
recording made without a DRAM source). `source_name` and `why` are the recording's, so a replay of the
simulated machine still says SIMULATED."""

from __future__ import annotations

import threading
from collections import deque

from pmutop.core.dram_reading import PackageDram

KEEP = 120  # intervals kept, as the package sampler keeps (the memory panel's 120-column history)


class ReplayPackageFeed:
    """`push` is the replay feed's (its pacing thread or a seek); the rest is for the view (any thread)."""

    def __init__(self, source_name: str, why: str, keep: int = KEEP) -> None:
        self._source_name = source_name
        self._why = why
        self._lock = threading.Lock()
        self._readings: deque[tuple[float, list[PackageDram]]] = deque(maxlen=keep)
        self._seq = 0

    @property
    def seq(self) -> int:
        return self._seq

    @property
    def source_name(self) -> str:
        return self._source_name

    @property
    def why(self) -> str:
        return self._why

    def latest(self) -> list[PackageDram] | None:
        with self._lock:
            return self._readings[-1][1] if self._readings else None

    def latest_time(self) -> float:
        with self._lock:
            return self._readings[-1][0] if self._readings else 0.0

    def history(self, package: int) -> list[PackageDram]:
        with self._lock:
            readings = [packages for _, packages in self._readings]
        return [p for packages in readings for p in packages if p.package == package]

    def timeline(self) -> list[tuple[float, list[PackageDram]]]:
        with self._lock:
            return list(self._readings)

    def push(self, time: float, packages: list[PackageDram]) -> None:
        """One recorded reading, stamped with the run time of the CPU samples it was read after."""
        with self._lock:
            self._readings.append((time, packages))
            self._seq += 1

    def clear(self) -> None:
        """A seek: the intervals pushed next are the history (the view redraws: seq moves on)."""
        with self._lock:
            self._readings.clear()
            self._seq += 1
