"""The last readings of a once-per-interval source, each stamped with the run time of the interval it covers:
appended by one thread (a sampler's, a replay's), read by any (the live view, the recorder). Shared by the
engine's task and package samplers and the replay's package feed."""

from __future__ import annotations

import threading
from collections import deque
from typing import Generic, TypeVar

KEEP = 120  # readings kept: the views' history (a 120-column plot), as the per-core history keeps

Reading = TypeVar("Reading")


class Timeline(Generic[Reading]):
    """`seq` grows by one per reading appended (and per clear), so a view redraws only when it moved."""

    failure: str | None = None  # why the readings stopped (a sampler's source broke), once they have

    @property
    def reading_thread(self) -> bool:
        """Whether a thread of its own appends each interval's reading just after that interval's CPU samples
        (the engine's task and package samplers: a view can wait for it, briefly, with wait_past)."""
        return False

    def __init__(self, keep: int = KEEP) -> None:
        self._readings: deque[tuple[float, Reading]] = deque(maxlen=keep)
        self._lock = threading.Lock()  # appended by the reader, read by the UI thread
        self._appended = threading.Condition(self._lock)  # wait_past's wake-up
        self._seq = 0

    @property
    def seq(self) -> int:
        return self._seq

    def wait_past(self, seq: int, timeout: float) -> bool:
        """Block until the seq is past `seq` or `timeout` seconds have gone; whether it is (any thread)."""
        with self._appended:
            return self._appended.wait_for(lambda: self._seq > seq, timeout)

    def latest(self) -> Reading | None:
        with self._lock:
            return self._readings[-1][1] if self._readings else None

    def latest_time(self) -> float:
        """When the newest reading's interval ended (seconds since the start; 0 before the first)."""
        with self._lock:
            return self._readings[-1][0] if self._readings else 0.0

    def timeline(self) -> list[tuple[float, Reading]]:
        """Every kept interval: (time, reading), oldest first."""
        with self._lock:
            return list(self._readings)

    def readings(self) -> list[Reading]:
        """Every kept reading, oldest first."""
        with self._lock:
            return [reading for _, reading in self._readings]

    def append(self, time: float, reading: Reading) -> int:
        """Keep one reading; returns the new seq (its index when nothing was cleared)."""
        with self._lock:
            self._readings.append((time, reading))
            self._seq += 1
            self._appended.notify_all()
            return self._seq

    def clear(self) -> None:
        """Forget every reading (a replay's seek: the ones appended next are the history)."""
        with self._lock:
            self._readings.clear()
            self._seq += 1
            self._appended.notify_all()
