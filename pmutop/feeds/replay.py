"""Replaying a recording as a SampleFeed for the live view (paced, pausable, seekable); the batch printers'
replay is pmutop.sinks.batch_replay."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Generator

from pmutop.core.errors import PmutopError
from pmutop.core.feed import HostLabels, ReplayControls, SampleFeed
from pmutop.core.ring import SampleRing
from pmutop.feeds.replay_packages import ReplayPackageFeed
from pmutop.feeds.replay_tasks import ReplayTaskFeed
from pmutop.probes.tasks import TopTask
from pmutop.recording.index import RecordingIndex
from pmutop.recording.reader import RecordedInterval, Recording

Group = RecordedInterval  # one interval: each sample with its recorded task note, and its snapshot

SPEEDS = ("1", "2", "10", "max")
HISTORY_ON_SEEK = 60  # intervals pushed at once after a seek, so plots and heatmaps have their history
SEEK_WAIT = 0.3  # seconds a seek past what is indexed waits for the index before it stops at its end


def speed_factor(speed: str) -> float | None:
    """None: as fast as possible."""
    return None if speed == "max" else float(speed)


class ReplayFeed(SampleFeed, ReplayControls, HostLabels):
    """A SampleFeed over a recording: a thread pushes the recorded samples into rings at `speed` times the
    recorded pace. pause/resume/seek/seek_to/set_speed are what the replay keys call.

    The file is streamed: the first interval is pushed at once while a second thread indexes the file for
    seeking (`notice` says how far); memory holds the rings and the index, never the whole recording.

    It is also the replay's task source (top_per_cpu): the top tasks recorded with the intervals pushed; and
    `task_feed` is the process and cgroup views' TaskFeed (the snapshots recorded with the intervals pushed;
    None when the recording has none); `package_feed` the memory views' PackageFeed (the DRAM readings recorded
    with them; None when the recording has none)."""

    def __init__(self, recording: Recording, speed: str = "1", ring_capacity: int = 600) -> None:
        self.recording = recording
        h = recording.header
        self.cpus = list(h.cpus)
        self.rings = {cpu: SampleRing(ring_capacity) for cpu in self.cpus}
        self.index = RecordingIndex(recording)
        self.index.start()
        self._reader: Generator[Group, None, None] = recording.iter_recorded_intervals()  # the next step()'s
        self._peeked: Group | None = None
        self._tasks: dict[int, TopTask] = {}  # the latest recorded top task of each CPU
        self.task_feed = ReplayTaskFeed(h.task_events) if h.task_events is not None else None
        dram = h.dram
        self.package_feed = ReplayPackageFeed(dram.get("source", "?"), dram.get("why", "")) if dram else None
        self._at_end = False
        self.error: str | None = None  # the reading stopped at a damaged place
        self._keys = h.keys
        self._remote = h.remote
        # A recording of --connect names each row host:cpu (the live view's row names); a local one has none.
        self.labels = {int(cpu): str(name) for cpu, name in h.backend.get("labels", {}).items()}
        self._topdown = h.topdown
        self.speed = speed
        self._pos = 0  # next interval to push
        self._elapsed = 0.0  # recorded time of the last interval pushed
        self._failures: dict[int, str] = {}
        self._cond = threading.Condition()
        self._paused = False
        self._closed = False
        self._thread: threading.Thread | None = None

    # -- SampleFeed

    @property
    def interval(self) -> float:
        return self.recording.header.interval

    def keys(self, cpu: int) -> list[str]:
        return self._keys.get(cpu, [])

    def topdown_method(self, cpu: int) -> str | None:
        return self._topdown.get(cpu)

    def elapsed(self) -> float:
        return self._elapsed

    def failures(self) -> dict[int, str]:
        return dict(self._failures)

    def wait_for_samples(
        self,
        counts: dict[int, int],
        timeout: float,
        on_wait: Callable[[], None] | None = None,
        stop: threading.Event | None = None,
    ) -> bool:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                live = [c for c in counts if c not in self._failures]
                if all(self.rings[c].count > counts[c] for c in live):
                    return True
                if time.monotonic() >= deadline or (stop is not None and stop.is_set()) or self._closed:
                    return False
                self._cond.wait(0.05)
                if on_wait:
                    on_wait()

    def set_interval(self, seconds: float) -> None:
        """A recording's interval is fixed: ignored."""

    # -- TaskSource

    def top_per_cpu(self) -> dict[int, TopTask]:
        """The top tasks recorded with the intervals pushed so far (none in a recording made without them)."""
        with self._cond:
            return dict(self._tasks)

    # -- replay control (any thread)

    @property
    def paused(self) -> bool:
        return self._paused

    @property
    def position(self) -> int:
        return self._pos

    @property
    def length(self) -> int:
        """Intervals in the whole recording (waits for the index to be complete)."""
        self.index.wait()
        return self.index.count

    @property
    def duration(self) -> float:
        """Recorded seconds so far indexed (all of them once the index is complete)."""
        return self.index.duration

    @property
    def finished(self) -> bool:
        with self._cond:
            return self._peek() is None

    @property
    def notice(self) -> str | None:
        """One line for the status: how far the index is (seeks stop at its end until it is complete), what
        stopped the reading, or that the last line was cut short; None when there is nothing to say."""
        index = self.index
        if self.error or index.error:
            return self.error or index.error
        if not index.complete:
            return f"indexing {index.progress * 100:.0f}%"
        if self.recording.truncated_if_known:
            return "last line cut short: skipped"  # short: whole at 80 columns, beside END
        return None

    def set_paused(self, paused: bool) -> None:
        with self._cond:
            self._paused = paused
            self._cond.notify_all()

    def set_speed(self, speed: str) -> None:
        if speed not in SPEEDS:
            raise ValueError(f"speed must be one of {', '.join(SPEEDS)}")
        with self._cond:
            self.speed = speed
            self._cond.notify_all()

    def next_speed(self) -> str:
        self.set_speed(SPEEDS[(SPEEDS.index(self.speed) + 1) % len(SPEEDS)])
        return self.speed

    def seek(self, delta: int) -> None:
        """Jump `delta` intervals (back when negative) from the current position."""
        self._jump(self._pos + delta)

    def seek_to(self, seconds: float) -> None:
        """Jump to the first interval at or after `seconds` of recorded time."""
        index = self.index
        found = index.first_at(seconds)
        if found is None and not index.complete:  # not indexed yet: give the index a moment
            index.wait(timeout=SEEK_WAIT)
            found = index.first_at(seconds)
        self._jump((index.count if found is None else found) + 1)

    def _jump(self, target: int) -> None:
        """Show interval `target - 1` now, with the intervals before it as history; go on from there."""
        index = self.index
        if target > index.count:
            index.wait(target, timeout=SEEK_WAIT)  # past what is indexed yet: stop at its end
        with self._cond:
            if not index.count:
                return  # nothing indexed yet to go to
            target = max(1, min(target, index.count))
            first = max(0, target - HISTORY_ON_SEEK)
            reader = self.recording.iter_recorded_intervals(index.restart(first))
            self._close_reader()
            self._reader, self._peeked, self._at_end = reader, None, False
            self._pos = first
            self._tasks = {}  # the intervals pushed now say what ran
            if self.task_feed is not None:
                self.task_feed.clear()
            if self.package_feed is not None:
                self.package_feed.clear()
            for _ in range(target - first):
                group = self._take()
                if group is None:
                    break
                self._push(group)
                self._pos += 1
            self._cond.notify_all()

    # -- the pacing thread

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="pmutop-replay", daemon=True)
        self._thread.start()

    def wake_waiters(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self.index.stop()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=2.0)
        with self._cond:
            self._close_reader()

    def step(self) -> bool:
        """Push the next interval now; False at the end (tests and the pacing thread)."""
        return self._step() is not None

    def _step(self) -> Group | None:
        with self._cond:
            group = self._take()
            if group is None:
                return None
            self._push(group)
            self._pos += 1
            self._cond.notify_all()
            return group

    # -- reading the file (under self._cond)

    def _peek(self) -> Group | None:
        """The next interval, read but not pushed; None at the end (or where the file is damaged)."""
        if self._peeked is None and not self._at_end:
            try:
                self._peeked = next(self._reader, None)
            except PmutopError as e:  # damaged or unreadable from here on: the replay ends here, and says why
                self.error = str(e)
                self._peeked = None
            self._at_end = self._peeked is None
        return self._peeked

    def _take(self) -> Group | None:
        group = self._peek()
        self._peeked = None
        return group

    def _close_reader(self) -> None:
        self._reader.close()  # its file

    def _push(self, group: Group) -> None:
        # The interval's snapshot and packages first: whoever the samples wake (the view) finds them there.
        if group.snapshot is not None and self.task_feed is not None:
            self.task_feed.push(group.snapshot.snapshot)
        if self.package_feed is not None:
            for recorded in group.packages:
                self.package_feed.push(recorded.time, recorded.packages)
        for s, note in group.samples:
            ring = self.rings.get(s.cpu)
            if ring is None:
                continue
            if note is not None:  # a lookup was recorded here (no note: keep the last one, as the view did)
                task = note.task
                if task is None:
                    self._tasks.pop(s.cpu, None)
                else:
                    self._tasks[s.cpu] = TopTask(task.name, task.pid, task.cpu_seconds)
            # Renumbered: a seek pushes old samples again, and each ring's numbers must keep going up.
            ring.push(dataclasses.replace(s, seq=ring.count + 1))
            if s.error and not self._remote:
                self._failures[s.cpu] = s.error
        self._elapsed = max((s.time for s, _ in group.samples), default=self._elapsed)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._closed and (self._paused or self._peek() is None):
                    self._cond.wait(0.2)
                if self._closed:
                    return
                factor = speed_factor(self.speed)
            group = self._step()
            if group is None:  # a seek to the end came in between
                continue
            wait = 0.0 if factor is None else max(s.interval for s, _ in group.samples) / factor
            deadline = time.monotonic() + wait
            with self._cond:
                pos = self._pos
                speed = self.speed
                # Sleep the interval out, but wake at once for a seek, a speed change or the end.
                while not self._closed and self._pos == pos and self.speed == speed:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    self._cond.wait(remaining)
                if factor is None:
                    self._cond.wait(0.001)  # let the view catch its breath between intervals
