"""Replaying a recording as a SampleFeed for the live view (paced, pausable, seekable); the batch printers'
replay is pmutop.sinks.batch_replay."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable

from pmutop.core.feed import ReplayControls, SampleFeed
from pmutop.core.ring import SampleRing
from pmutop.core.sample import Sample
from pmutop.recording.reader import Recording

SPEEDS = ("1", "2", "10", "max")
HISTORY_ON_SEEK = 60  # intervals pushed at once after a seek, so plots and heatmaps have their history


def speed_factor(speed: str) -> float | None:
    """None: as fast as possible."""
    return None if speed == "max" else float(speed)


class ReplayFeed(SampleFeed, ReplayControls):
    """A SampleFeed over a recording: a thread pushes the recorded samples into rings at `speed` times the
    recorded pace. pause/resume/seek/seek_to/set_speed are what the replay keys call."""

    def __init__(self, recording: Recording, speed: str = "1", ring_capacity: int = 600) -> None:
        self.recording = recording
        h = recording.header
        self.cpus = list(h.cpus)
        self.rings = {cpu: SampleRing(ring_capacity) for cpu in self.cpus}
        self._intervals = recording.intervals()
        self._keys = h.keys
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

    # -- replay control (any thread)

    @property
    def paused(self) -> bool:
        return self._paused

    @property
    def position(self) -> int:
        return self._pos

    @property
    def length(self) -> int:
        return len(self._intervals)

    @property
    def duration(self) -> float:
        last = self._intervals[-1] if self._intervals else []
        return max((s.time for s in last), default=0.0)

    @property
    def finished(self) -> bool:
        return self._pos >= len(self._intervals)

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
        target = next(
            (i for i, group in enumerate(self._intervals) if max(s.time for s in group) >= seconds - 1e-9),
            len(self._intervals),
        )
        self._jump(target + 1)

    def _jump(self, target: int) -> None:
        """Show interval `target - 1` now, with the intervals before it as history; go on from there."""
        with self._cond:
            target = max(1, min(target, len(self._intervals)))
            for group in self._intervals[max(0, target - HISTORY_ON_SEEK) : target]:
                self._push(group)
            self._pos = target
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
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=2.0)

    def step(self) -> bool:
        """Push the next interval now; False at the end (tests and the pacing thread)."""
        with self._cond:
            if self._pos >= len(self._intervals):
                return False
            self._push(self._intervals[self._pos])
            self._pos += 1
            self._cond.notify_all()
            return True

    def _push(self, group: list[Sample]) -> None:
        for s in group:
            ring = self.rings.get(s.cpu)
            if ring is None:
                continue
            # Renumbered: a seek pushes old samples again, and each ring's numbers must keep going up.
            ring.push(dataclasses.replace(s, seq=ring.count + 1))
            if s.error:
                self._failures[s.cpu] = s.error
        self._elapsed = max((s.time for s in group), default=self._elapsed)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._closed and (self._paused or self._pos >= len(self._intervals)):
                    self._cond.wait(0.2)
                if self._closed:
                    return
                group = self._intervals[self._pos]
                factor = speed_factor(self.speed)
            self.step()
            wait = 0.0 if factor is None else max(s.interval for s in group) / factor
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
