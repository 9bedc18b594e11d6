"""The engine's task sampler: reads a TaskCounterSource once per interval, just after the CPU samples of that
interval, and keeps the snapshots the live view's process and cgroup views read (pmutop.core.task_reading's
TaskFeed). Its own thread does the reading (pmutop.engine.interval_sampler): the UI thread only looks at what
is already there."""

from __future__ import annotations

from pmutop.core.feed import SampleFeed
from pmutop.core.sample import Sample
from pmutop.core.task_reading import CgroupReading, TaskCounterSource, TaskReading, TaskSnapshot
from pmutop.core.timeline import KEEP
from pmutop.engine.interval_sampler import IntervalSampler


class TaskSampler(IntervalSampler[TaskSnapshot]):
    """Implements TaskFeed. `start()` runs the reading thread; `sample_once()` reads now (unthreaded runs,
    tests and pictures). Listeners (the recorder) get every snapshot with its interval index and time, in the
    reading thread: they must not block it for long."""

    thread_name = "pmutop-tasks"

    def __init__(self, source: TaskCounterSource, feed: SampleFeed, keep: int = KEEP) -> None:
        super().__init__(feed, keep)
        self.source = source
        self.events = list(source.events)
        self._top: int | None = None  # asked for, not yet passed to the source

    # -- TaskFeed (seq, latest, latest_time: the Timeline's)

    def task_history(self, pid: int, start_time: float = 0.0) -> list[TaskReading]:
        """The process's readings, oldest first. `start_time` (when known) tells a reused PID from the process."""
        out = []
        for snapshot in self.readings():
            for r in snapshot.tasks:
                if r.pid == pid and (not start_time or not r.start_time or r.start_time == start_time):
                    out.append(r)
                    break
        return out

    def cgroup_history(self, path: str) -> list[CgroupReading]:
        return [c for snapshot in self.readings() for c in snapshot.cgroups if c.path == path]

    def set_top(self, n: int) -> None:
        self._top = n

    # -- IntervalSampler

    def _begin_source(self) -> None:
        self.source.begin()

    def _read(self, cpu_samples: list[Sample]) -> TaskSnapshot:
        if self._top is not None:
            set_top = getattr(self.source, "set_top", None)  # a source that picks its processes (the top N)
            if callable(set_top):
                set_top(self._top)
            self._top = None
        return self.source.read(cpu_samples)

    def _failure(self, error: Exception) -> str:
        return f"per-task counters stopped: {error}"

    def _interval_index(self, cpu_samples: list[Sample], seq: int) -> int:
        # Listeners (the recorder) pair the snapshot with its interval: the seq of the CPU samples it was read with.
        return max((s.seq for s in cpu_samples), default=seq)
