"""The engine's task sampler: reads a TaskCounterSource once per interval, just after the CPU samples of that
interval, and keeps the snapshots the live view's process and cgroup views read (pmutop.core.task_reading's
TaskFeed). Its own thread does the reading: the UI thread only looks at what is already there."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable

from pmutop.core.feed import SampleFeed
from pmutop.core.sample import Sample
from pmutop.core.task_reading import CgroupReading, TaskCounterSource, TaskReading, TaskSnapshot

KEEP = 120  # snapshots kept: the views' history (a 120-column plot), as the per-core history keeps
JOIN_TIMEOUT_S = 2.0
Listener = Callable[[int, float, TaskSnapshot], None]  # (the CPU samples' seq, seconds since the start, snapshot)


class TaskSampler:
    """Implements TaskFeed. `start()` runs the reading thread; `sample_once()` reads now (unthreaded runs,
    tests and pictures). Listeners (the recorder) get every snapshot with its interval index and time, in the
    reading thread: they must not block it for long."""

    def __init__(self, source: TaskCounterSource, feed: SampleFeed, keep: int = KEEP) -> None:
        self.source = source
        self.feed = feed
        self.events = list(source.events)
        self._snapshots: deque[tuple[float, TaskSnapshot]] = deque(maxlen=max(keep, KEEP))
        self._lock = threading.Lock()  # the history is appended by the reader, read by the UI thread
        self._seq = 0
        self._listeners: list[Listener] = []
        self._top: int | None = None  # asked for, not yet passed to the source
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._begun = False
        self.failure: str | None = None  # why the reading stopped (the views say it once)

    # -- TaskFeed

    @property
    def seq(self) -> int:
        return self._seq

    def latest(self) -> TaskSnapshot | None:
        with self._lock:
            return self._snapshots[-1][1] if self._snapshots else None

    def latest_time(self) -> float:
        """When the newest snapshot's interval ended (seconds since the start; 0 before the first)."""
        with self._lock:
            return self._snapshots[-1][0] if self._snapshots else 0.0

    def task_history(self, pid: int, start_time: float = 0.0) -> list[TaskReading]:
        """The process's readings, oldest first. `start_time` (when known) tells a reused PID from the process."""
        with self._lock:
            snapshots = [s for _, s in self._snapshots]
        out = []
        for snapshot in snapshots:
            for r in snapshot.tasks:
                if r.pid == pid and (not start_time or not r.start_time or r.start_time == start_time):
                    out.append(r)
                    break
        return out

    def cgroup_history(self, path: str) -> list[CgroupReading]:
        with self._lock:
            snapshots = [s for _, s in self._snapshots]
        return [c for snapshot in snapshots for c in snapshot.cgroups if c.path == path]

    def set_top(self, n: int) -> None:
        self._top = n

    # -- feeding

    def add_listener(self, callback: Listener) -> None:
        self._listeners.append(callback)

    def sample_once(self, cpu_samples: list[Sample] | None = None) -> TaskSnapshot:
        """Read the source now (after the CPU samples of the interval it covers) and keep the snapshot."""
        if not self._begun:
            self._begin()
        if self._top is not None:
            set_top = getattr(self.source, "set_top", None)  # a source that picks its processes (the top N)
            if callable(set_top):
                set_top(self._top)
            self._top = None
        samples = cpu_samples if cpu_samples is not None else self._latest_samples()
        snapshot = self.source.read(samples)
        at = max((s.time for s in samples), default=self.feed.elapsed())
        with self._lock:
            self._snapshots.append((at, snapshot))
            self._seq += 1
        # Listeners (the recorder) pair the snapshot with its interval: the seq of the CPU samples it was read with.
        index = max((s.seq for s in samples), default=self._seq)
        for listener in self._listeners:
            listener(index, at, snapshot)
        return snapshot

    def _begin(self) -> None:
        self._begun = True
        self.source.begin()

    def _latest_samples(self) -> list[Sample]:
        return [s for ring in self.feed.rings.values() if (s := ring.latest()) is not None and s.error is None]

    # -- the thread

    def start(self) -> None:
        """Begin counting now (with the CPU counters' first interval) and read once per interval after."""
        self._begin()
        self._thread = threading.Thread(target=self._run, name="pmutop-tasks", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        seen = {cpu: ring.count for cpu, ring in self.feed.rings.items()}
        while not self._stop.is_set():
            if not self.feed.wait_for_samples(seen, timeout=0.5, stop=self._stop):
                continue
            failed = self.feed.failures()
            samples = []
            for cpu, ring in self.feed.rings.items():
                seen[cpu] = ring.count
                latest = ring.latest()
                if latest is not None and cpu not in failed and latest.error is None:
                    samples.append(latest)
            if self._stop.is_set():
                return
            try:
                self.sample_once(samples)
            except Exception as e:  # a source that broke: the views say why; the CPU views go on
                self.failure = f"per-task counters stopped: {e}"
                return

    def stop(self) -> None:
        """End the thread (its wait ends at once). Any thread, more than once; the run closes the source."""
        self._stop.set()
        self.feed.wake_waiters()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=JOIN_TIMEOUT_S)
        self._thread = None
