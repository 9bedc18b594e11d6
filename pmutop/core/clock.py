"""Time sources: the real monotonic clock, or a manual one for deterministic tests and screenshots."""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    def now_ns(self) -> int: ...


class MonotonicClock:
    # The C function itself, not a method calling it: the engine asks for the time several times an interval.
    now_ns = staticmethod(time.monotonic_ns)


class ManualClock:
    """A clock that only moves when told to; safe to share between sampler threads."""

    def __init__(self, start_ns: int = 0) -> None:
        self._ns = start_ns
        self._lock = threading.Lock()

    def now_ns(self) -> int:
        with self._lock:
            return self._ns

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._ns += round(seconds * 1_000_000_000)

    def set_ns(self, ns: int) -> None:
        with self._lock:
            self._ns = ns
