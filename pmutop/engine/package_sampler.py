"""The engine's package sampler: reads a DramSource (memory bandwidth per socket and channel) once per interval,
right after the CPU samples of that interval, and keeps the last readings for the views (the memory panel's
history), the batch printers and the recorder.

Its own thread does the reading (a source's read can take a while: one read() per uncore counter), so the UI
thread only ever copies what is already there under a short lock. `sample_once()` is the same step without
the thread, for runs that read every CPU from one loop (unthreaded batch: call it after each interval).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable

from pmutop.core.dram_reading import DramSource, PackageDram
from pmutop.core.feed import SampleFeed
from pmutop.core.sample import Sample

KEEP = 120  # intervals kept: the memory panel's history (a 120-column plot), as the per-core history keeps
JOIN_TIMEOUT_S = 2.0
_WAIT_S = 0.5  # one wait for the interval's samples; the loop then looks at its stop flag again
Listener = Callable[[int, float, list[PackageDram]], None]  # (interval index, seconds since the start, packages)


class PackageSampler:
    """`start()` runs the reading thread; `sample_once()` reads now. Listeners (the recorder) get every
    interval's packages with its index (1, 2, ...) and time, in the reading thread: they must not block it long.
    A source that fails stops the sampler (`failure` says why, once); the CPU views go on."""

    def __init__(self, source: DramSource, feed: SampleFeed, keep: int = KEEP) -> None:
        self.source = source
        self.feed = feed
        self._readings: deque[tuple[float, list[PackageDram]]] = deque(maxlen=max(keep, KEEP))
        self._lock = threading.Lock()  # the history is appended by the reader, read by the UI thread
        self._seq = 0
        self._listeners: list[Listener] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._begun = False
        self.failure: str | None = None

    # -- what readers see (core.dram_reading.PackageFeed)

    @property
    def reading_thread(self) -> bool:
        """Whether its own thread reads the source (else whoever drives the run calls sample_once)."""
        return self._thread is not None

    @property
    def source_name(self) -> str:
        return self.source.source

    @property
    def why(self) -> str:
        return self.source.why

    @property
    def seq(self) -> int:
        """How many intervals have been read (the index of the latest)."""
        return self._seq

    def latest(self) -> list[PackageDram] | None:
        with self._lock:
            return self._readings[-1][1] if self._readings else None

    def latest_time(self) -> float:
        """When the newest reading's interval ended (seconds since the start; 0 before the first)."""
        with self._lock:
            return self._readings[-1][0] if self._readings else 0.0

    def history(self, package: int) -> list[PackageDram]:
        """The package's readings, oldest first (up to KEEP intervals)."""
        with self._lock:
            readings = [packages for _, packages in self._readings]
        return [p for packages in readings for p in packages if p.package == package]

    def timeline(self) -> list[tuple[float, list[PackageDram]]]:
        """Every kept interval: (time, packages), oldest first."""
        with self._lock:
            return list(self._readings)

    # -- feeding

    def add_listener(self, callback: Listener) -> None:
        self._listeners.append(callback)

    def begin(self) -> None:
        """Start the first interval now: a read whose counts (everything since the source was opened, before
        the CPU counters started) are dropped."""
        if not self._begun:
            self._begun = True
            self.source.read()

    def sample_once(self, cpu_samples: list[Sample] | None = None) -> list[PackageDram]:
        """Read the source now (after the CPU samples of the interval it covers) and keep the reading; the
        unthreaded path (batch reading every CPU from one loop calls this after each interval)."""
        self.begin()
        packages = self.source.read()
        samples = cpu_samples if cpu_samples is not None else self._latest_samples()
        at = max((s.time for s in samples), default=self.feed.elapsed())
        with self._lock:
            self._readings.append((at, packages))
            self._seq += 1
            index = self._seq
        for listener in self._listeners:
            listener(index, at, packages)
        return packages

    def _latest_samples(self) -> list[Sample]:
        return [s for ring in self.feed.rings.values() if (s := ring.latest()) is not None and s.error is None]

    # -- the thread

    def start(self) -> None:
        """Begin the first interval now (with the CPU counters' first) and read once per interval after."""
        self.begin()
        self._thread = threading.Thread(target=self._run, name="pmutop-packages", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        seen = {cpu: ring.count for cpu, ring in self.feed.rings.items()}
        while not self._stop.is_set():
            if not self.feed.wait_for_samples(seen, timeout=_WAIT_S, stop=self._stop):
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
                self.failure = f"DRAM bandwidth stopped: {str(e).removeprefix('DRAM bandwidth: ')}"
                return

    def stop(self) -> None:
        """End the thread (its wait ends at once). Any thread, more than once; whoever opened the source closes
        it (after this)."""
        self._stop.set()
        self.feed.wake_waiters()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=JOIN_TIMEOUT_S)
        self._thread = None
