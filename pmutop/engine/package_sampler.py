"""The engine's package sampler: reads a DramSource (memory bandwidth per socket and channel) once per interval,
right after the CPU samples of that interval, and keeps the last readings for the views (the memory panel's
history), the batch printers and the recorder.

Its own thread does the reading (pmutop.engine.interval_sampler; a source's read can take a while: one read()
per uncore counter), so the UI thread only ever copies what is already there under a short lock.
`sample_once()` is the same step without the thread, for runs that read every CPU from one loop (unthreaded
batch: call it after each interval).
"""

from __future__ import annotations

from pmutop.core.dram_reading import DramSource, PackageDram
from pmutop.core.feed import SampleFeed
from pmutop.core.sample import Sample
from pmutop.core.timeline import KEEP
from pmutop.engine.interval_sampler import IntervalSampler


class PackageSampler(IntervalSampler[list[PackageDram]]):
    """`start()` runs the reading thread; `sample_once()` reads now. Listeners (the recorder) get every
    interval's packages with its index (1, 2, ...) and time, in the reading thread: they must not block it long.
    A source that fails stops the sampler (`failure` says why, once); the CPU views go on."""

    thread_name = "pmutop-packages"

    def __init__(self, source: DramSource, feed: SampleFeed, keep: int = KEEP) -> None:
        super().__init__(feed, keep)
        self.source = source

    # -- what readers see (core.dram_reading.PackageFeed; seq, latest, latest_time, timeline: the Timeline's)

    @property
    def source_name(self) -> str:
        return self.source.source

    @property
    def why(self) -> str:
        return self.source.why

    def history(self, package: int) -> list[PackageDram]:
        """The package's readings, oldest first (up to KEEP intervals)."""
        return [p for packages in self.readings() for p in packages if p.package == package]

    # -- IntervalSampler

    def _begin_source(self) -> None:
        # A read whose counts (everything since the source was opened, before the CPU counters started) are dropped.
        self.source.read()

    def _read(self, cpu_samples: list[Sample]) -> list[PackageDram]:
        return self.source.read()

    def _failure(self, error: Exception) -> str:
        return f"DRAM bandwidth stopped: {str(error).removeprefix('DRAM bandwidth: ')}"
