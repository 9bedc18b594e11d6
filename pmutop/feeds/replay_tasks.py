"""The process and cgroup views of a replay: a TaskFeed (pmutop.core.task_reading) over the snapshots a
recording holds, filled by the replay feed as it pushes each interval (get it as `ReplayFeed.task_feed`: None
for a recording made without per-process or per-cgroup counters)."""

from __future__ import annotations

import threading
from collections import deque

from pmutop.core.task_reading import CgroupReading, TaskReading, TaskSnapshot

HISTORY = 120  # intervals of history kept per process and cgroup (the TaskFeed promises at least 60)


class ReplayTaskFeed:
    """The recorded snapshots, one per interval pushed, with each process's and cgroup's recent readings.
    `push` is the replay feed's (its pacing thread or a seek); the rest is for the view (any thread)."""

    def __init__(self, events: list[str], history: int = HISTORY) -> None:
        self.events = list(events)
        self.history = history
        self._lock = threading.Lock()
        self._seq = 0
        self._latest: TaskSnapshot | None = None
        self._tasks: dict[int, deque[TaskReading]] = {}
        self._cgroups: dict[str, deque[CgroupReading]] = {}
        self._seen: dict[int | str, int] = {}  # pid or cgroup path -> the seq it was last in

    @property
    def seq(self) -> int:
        return self._seq

    def latest(self) -> TaskSnapshot | None:
        return self._latest

    def task_history(self, pid: int, start_time: float = 0.0) -> list[TaskReading]:
        """Oldest first; with `start_time`, only that process's readings (not another's that reused its PID)."""
        with self._lock:
            readings = list(self._tasks.get(pid, ()))
        if start_time:
            readings = [r for r in readings if r.start_time in (0.0, start_time)]
        return readings

    def cgroup_history(self, path: str) -> list[CgroupReading]:
        with self._lock:
            return list(self._cgroups.get(path, ()))

    def set_top(self, n: int) -> None:
        """A recording holds the processes it counted: nothing to change."""

    def push(self, snapshot: TaskSnapshot) -> None:
        """The snapshot of the interval just pushed."""
        with self._lock:
            seq = self._seq + 1
            for r in snapshot.tasks:
                past = self._tasks.get(r.pid)
                if past is None or (past and r.start_time and past[-1].start_time not in (0.0, r.start_time)):
                    past = self._tasks[r.pid] = deque(maxlen=self.history)  # new, or its PID was reused
                past.append(r)
                self._seen[r.pid] = seq
            for c in snapshot.cgroups:
                self._cgroups.setdefault(c.path, deque(maxlen=self.history)).append(c)
                self._seen[c.path] = seq
            if seq % self.history == 0:  # now and then: forget what has not been seen for a whole history
                for key in [k for k, at in self._seen.items() if seq - at >= self.history]:
                    del self._seen[key]
                    if isinstance(key, int):
                        self._tasks.pop(key, None)
                    else:
                        self._cgroups.pop(key, None)
            self._latest = snapshot
            self._seq = seq

    def clear(self) -> None:
        """A seek: the intervals pushed next say what ran (the view redraws: seq moves on)."""
        with self._lock:
            self._tasks.clear()
            self._cgroups.clear()
            self._seen.clear()
            self._latest = None
            self._seq += 1
