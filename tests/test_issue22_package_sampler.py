"""Issue 22, the engine's package sampler (pmutop.engine.package_sampler): one DRAM reading per interval after the
CPU samples, a ring of 120 intervals, listeners with index and time, readers never wait for a slow source, a
clean stop, a broken source said once; on a real (threaded, simulated) engine and with an unthreaded one."""

from __future__ import annotations

import threading
import time

import pytest

from pmutop.backends.sim import SimBackend
from pmutop.core.clock import ManualClock
from pmutop.core.dram_reading import DramReading, PackageDram, package_totals
from pmutop.core.errors import PmutopError
from pmutop.engine.engine import Engine
from pmutop.engine.package_sampler import KEEP, PackageSampler
from pmutop.sim.config import SimConfig
from pmutop.sim.dram import SimDramCounters
from pmutop.sim.platform import SimPlatform


class CountingSource:
    """Interval n reads n lines on package 0 and 2n on package 1; `delay` makes each read slow."""

    source = "uncore"
    why = "fake"

    def __init__(self, delay: float = 0.0, fail_after: int | None = None) -> None:
        self.reads = 0
        self.delay = delay
        self.fail_after = fail_after
        self.closed = False
        self.reading = threading.Event()  # set while a read is in progress

    def read(self) -> list[PackageDram]:
        self.reading.set()
        try:
            if self.delay:
                time.sleep(self.delay)
            if self.fail_after is not None and self.reads >= self.fail_after:
                raise PmutopError("DRAM bandwidth: reading cpu 0's counter failed: No such device")
            n = self.reads
            self.reads += 1
            return [self._package(pkg, n * (pkg + 1) * 64.0) for pkg in (0, 1)]
        finally:
            self.reading.clear()

    @staticmethod
    def _package(pkg: int, value: float) -> PackageDram:
        channel = DramReading(f"uncore_imc_{pkg}", pkg, 0, value, value / 2, 1.0)
        return package_totals(pkg, (channel,), 1.0, None)

    def close(self) -> None:
        self.closed = True


def unthreaded_engine(cpus: int = 2) -> tuple[Engine, ManualClock]:
    clock = ManualClock(start_ns=1_000_000_000)
    platform = SimPlatform(SimConfig(cpus=cpus, model="spr"), clock)
    engine = Engine(SimBackend(platform, clock, None), platform, clock, list(range(cpus)), 1.0, threaded=False)
    engine.start()
    return engine, clock


def test_unthreaded_path_keeps_120_intervals_and_tells_listeners() -> None:
    engine, clock = unthreaded_engine()
    try:
        source = CountingSource()
        sampler = PackageSampler(source, engine)
        heard: list[tuple[int, float, list[PackageDram]]] = []
        sampler.add_listener(lambda index, at, packages: heard.append((index, at, packages)))
        sampler.begin()  # the read before the first interval is dropped
        assert sampler.latest() is None and sampler.seq == 0
        for _ in range(KEEP + 10):
            clock.advance(1.0)
            samples = engine.tick()
            sampler.sample_once(samples)
        assert sampler.seq == KEEP + 10
        assert [index for index, _, _ in heard] == list(range(1, KEEP + 11))
        assert [at for _, at, _ in heard] == pytest.approx([float(i) for i in range(1, KEEP + 11)])
        history = sampler.history(1)
        assert len(history) == KEEP and all(p.package == 1 for p in history)
        # Oldest first; interval n (1-based) read (n) x 2 lines on package 1; the first 10 fell out.
        assert [p.read_bytes for p in history] == [n * 2 * 64.0 for n in range(11, KEEP + 11)]
        latest = sampler.latest()
        assert latest is not None and [p.package for p in latest] == [0, 1]
        assert sampler.latest_time() == pytest.approx(KEEP + 10.0)
        assert len(sampler.timeline()) == KEEP
    finally:
        engine.stop()


def test_threaded_reads_once_per_interval_after_the_cpu_samples() -> None:
    """A threaded simulated engine at 50 ms: every reading's time is an interval's sample time, and the simulated
    DRAM reads add up to the LLC misses the CPUs counted in those intervals."""
    platform = SimPlatform(SimConfig(cpus=2, model="spr"))
    engine = Engine(SimBackend(platform, platform.clock, None), platform, platform.clock, [0, 1], 0.05)
    source = SimDramCounters(platform.machine)
    source.open()
    sampler = PackageSampler(source, engine)
    engine.start()
    try:
        sampler.start()
        deadline = time.monotonic() + 10
        while sampler.seq < 5 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert sampler.seq >= 5
        times = [at for at, _ in sampler.timeline()]
        assert times == sorted(times) and len(set(times)) == len(times)
        sample_times = {s.time for cpu in (0, 1) for s in engine.rings[cpu]}
        assert all(t in sample_times for t in times)
    finally:
        sampler.stop()
        engine.stop()
        source.close()
    assert sampler._thread is None


def test_a_slow_source_never_blocks_the_readers() -> None:
    engine, clock = unthreaded_engine()
    try:
        source = CountingSource(delay=0.6)
        sampler = PackageSampler(source, engine)
        sampler.begin()
        clock.advance(1.0)
        engine.tick()
        sampler.sample_once()
        reader = threading.Thread(target=sampler.sample_once)  # the reading thread's work, slow
        reader.start()
        assert source.reading.wait(2.0)
        start = time.monotonic()
        latest, history, seq = sampler.latest(), sampler.history(0), sampler.seq
        assert time.monotonic() - start < 0.05  # the UI thread's calls return while the read is going on
        assert latest is not None and len(history) == 1 and seq == 1
        reader.join()
        assert sampler.seq == 2
    finally:
        engine.stop()


def test_stop_ends_the_thread_at_once_and_leaves_the_source_to_its_owner() -> None:
    engine, _ = unthreaded_engine()
    try:
        source = CountingSource()
        sampler = PackageSampler(source, engine)
        sampler.start()  # waits for samples that never come (nobody ticks)
        time.sleep(0.1)
        start = time.monotonic()
        sampler.stop()
        assert time.monotonic() - start < 1.0
        sampler.stop()  # twice is fine
        assert sampler._thread is None and not source.closed
    finally:
        engine.stop()


def test_the_thread_ends_when_the_engine_stops() -> None:
    platform = SimPlatform(SimConfig(cpus=1, model="spr"))
    engine = Engine(SimBackend(platform, platform.clock, None), platform, platform.clock, [0], 0.05)
    sampler = PackageSampler(CountingSource(), engine)
    engine.start()
    sampler.start()
    thread = sampler._thread
    engine.stop()
    assert thread is not None
    thread.join(2.0)
    assert not thread.is_alive()
    sampler.stop()


def test_a_broken_source_stops_the_sampler_with_one_line() -> None:
    platform = SimPlatform(SimConfig(cpus=1, model="spr"))
    engine = Engine(SimBackend(platform, platform.clock, None), platform, platform.clock, [0], 0.05)
    source = CountingSource(fail_after=3)  # the begin read and two intervals, then it breaks
    sampler = PackageSampler(source, engine)
    engine.start()
    try:
        sampler.start()
        deadline = time.monotonic() + 10
        while sampler.failure is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert sampler.failure == "DRAM bandwidth stopped: reading cpu 0's counter failed: No such device"
        assert sampler.seq == 2 and len(sampler.history(0)) == 2
    finally:
        sampler.stop()
        engine.stop()


def test_the_sampler_is_the_views_package_feed() -> None:
    """The live view and the sinks read packages through core's PackageFeed, never the engine's class."""
    from pmutop.core.dram_reading import PackageFeed
    from pmutop.engine.package_sampler import PackageSampler

    members = [name for name in dir(PackageFeed) if not name.startswith("_")]
    assert members and all(hasattr(PackageSampler, name) for name in members)
