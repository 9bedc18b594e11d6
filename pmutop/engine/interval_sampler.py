"""What the engine's side samplers (tasks, packages) share: read a source once per interval, just after the
CPU samples of that interval, keep the readings for the views (a Timeline) and hand each to the listeners (the
recorder).

Their own thread does the reading (a source's read can take a while), so the UI thread only ever copies what
is already there under a short lock. `sample_once()` is the same step without the thread, for runs that read
every CPU from one loop (unthreaded batch, tests, pictures: call it after each interval).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import ClassVar

from pmutop.core.feed import SampleFeed
from pmutop.core.sample import Sample
from pmutop.core.timeline import KEEP, Reading, Timeline

JOIN_TIMEOUT_S = 2.0
WAIT_S = 0.5  # one wait for the interval's samples; the loop then looks at its stop flag again


class IntervalSampler(Timeline[Reading]):
    """`start()` runs the reading thread; `sample_once()` reads now. Listeners get every reading with its
    interval index and time, in the reading thread: they must not block it long. A source that fails stops
    the sampler (`failure` says why, once); the CPU views go on.

    A subclass says how to open the first interval (`_begin_source`), how to read (`_read`) and what a
    failure reads as (`_failure`)."""

    thread_name: ClassVar[str]

    def __init__(self, feed: SampleFeed, keep: int = KEEP) -> None:
        super().__init__(max(keep, KEEP))
        self.feed = feed
        self._listeners: list[Callable[[int, float, Reading], None]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._begun = False
        self.failure: str | None = None

    # -- what a subclass provides

    def _begin_source(self) -> None:
        """Start the source's first interval now."""
        raise NotImplementedError

    def _read(self, cpu_samples: list[Sample]) -> Reading:
        """Read the source (the interval that `cpu_samples` end)."""
        raise NotImplementedError

    def _failure(self, error: Exception) -> str:
        """One line: the reading stopped, and why."""
        raise NotImplementedError

    def _interval_index(self, cpu_samples: list[Sample], seq: int) -> int:
        """The index listeners get with a reading: by default how many have been read (1, 2, ...)."""
        return seq

    # -- feeding

    @property
    def reading_thread(self) -> bool:
        """Whether its own thread reads the source (else whoever drives the run calls sample_once)."""
        return self._thread is not None

    def add_listener(self, callback: Callable[[int, float, Reading], None]) -> None:
        self._listeners.append(callback)

    def begin(self) -> None:
        """Start the first interval now (once)."""
        if not self._begun:
            self._begun = True
            self._begin_source()

    def sample_once(self, cpu_samples: list[Sample] | None = None) -> Reading:
        """Read the source now (after the CPU samples of the interval it covers) and keep the reading."""
        self.begin()
        samples = cpu_samples if cpu_samples is not None else self._latest_samples()
        reading = self._read(samples)
        at = max((s.time for s in samples), default=self.feed.elapsed())
        index = self._interval_index(samples, self.append(at, reading))
        for listener in self._listeners:
            listener(index, at, reading)
        return reading

    def _latest_samples(self) -> list[Sample]:
        return [s for ring in self.feed.rings.values() if (s := ring.latest()) is not None and s.error is None]

    # -- the thread

    def start(self) -> None:
        """Begin the first interval now (with the CPU counters' first) and read once per interval after."""
        self.begin()
        self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        seen = {cpu: ring.count for cpu, ring in self.feed.rings.items()}
        while not self._stop.is_set():
            if not self.feed.wait_for_samples(seen, timeout=WAIT_S, stop=self._stop):
                if getattr(self.feed, "stopping", False):
                    return  # the engine stopped: no more intervals (its waits now return at once)
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
            except Exception as e:  # a source that broke: said once; the CPU views go on
                self.failure = self._failure(e)
                return

    def stop(self) -> None:
        """End the thread (its wait ends at once). Any thread, more than once; whoever opened the source
        closes it (after this)."""
        self._stop.set()
        self.feed.wake_waiters()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=JOIN_TIMEOUT_S)
        self._thread = None
