"""The engine: one Sampler per CPU (its counters, ring and delta bookkeeping), read by one of two drives on a
shared schedule, and what starts, paces and stops them.

Every CPU shares one deadline schedule (epoch + k * interval), so sample k of every CPU covers
the same wall-clock interval and lateness never accumulates into drift. Counters too narrow for the
interval are also read in between (CpuCounters.accumulate), off the schedule, so they never wrap twice
unseen; the sample at each deadline still reports the whole interval.

The two drives (`Engine.sampler_mode` says which, and why):
- native: where every CPU can be read natively (the msr backend on MSR files, the shim built), native threads,
  one pinned per CPU, read, and one Python thread turns their reads into Samples once per interval
  (pmutop.engine.native_samplers);
- Python: everywhere else (simulated CPUs, top-down through PERF_METRICS, rotating event groups, narrow
  counters, the perf backend, no shim, PMUTOP_SAMPLERS=python), one Python thread reads every CPU in turn at
  each deadline, on that CPU where rdpmc reads it (pmutop.engine.one_thread). A Python thread per CPU cost a
  wake-up and GIL hand-offs per CPU and interval, several times the reads themselves.
An unthreaded engine (tick, tick_on_schedule) reads in the caller's thread, as tests and batch runs step it.

Readers (wait_for_samples) register what they wait for and are woken once, by the sample that completes it,
not by every sample and not by polling.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any

from pmutop.backends.base import Backend, CpuCounters, Reading
from pmutop.core.clock import Clock
from pmutop.core.errors import PmutopError
from pmutop.core.ring import SampleRing
from pmutop.core.sample import Sample
from pmutop.core.undo import RestoreResult, UndoLog
from pmutop.engine.native_samplers import NativeDrive
from pmutop.engine.one_thread import OneThreadDrive
from pmutop.engine.sanity import CHECKED_KEYS, impossible
from pmutop.hw.platform import Platform
from pmutop.probes.power.monitor import PowerMonitor

NS = 1_000_000_000
SAMPLERS_ENV = "PMUTOP_SAMPLERS"  # "python": the Python drive even where the native threads could read
START_TIMEOUT_S = 20.0
JOIN_TIMEOUT_S = 2.0  # all sampler threads together; the restore goes ahead after that regardless


class Sampler:
    """Reads one CPU's counters on the engine's schedule and publishes Samples into its ring."""

    def __init__(self, engine: Engine, cpu: int, counters: CpuCounters, ring: SampleRing) -> None:
        self.engine = engine
        self.cpu = cpu
        self.counters = counters
        self.ring = ring
        self.started = False
        self.error: str | None = None
        self._t0_ns = 0
        self._prev_ns = 0  # clock time of the last sample's read
        self._last_read_ns = 0  # clock time of the last counter read (a sample's or an accumulate)
        self._tsc_total = 0
        # Known once counting starts: whether impossible() can find anything in these counters' counts, and
        # this CPU's package where the power monitor reads nothing for it (its fields are then only that): the
        # Sample is made without either call, every CPU, every interval.
        self._checked = True
        self._package: int | None = None

    @property
    def last_read_ns(self) -> int:
        """Clock time of the last counter read (a sample's or an accumulate)."""
        return self._last_read_ns

    @property
    def counting_since_ns(self) -> int:
        """Clock time this CPU's counters started (its first interval counts from here)."""
        return self._t0_ns

    def start_counting(self) -> None:
        self.started_at(self.counters.start())

    def started_at(self, at_ns: int) -> None:
        """Counting started at clock time at_ns (the baseline read)."""
        self._t0_ns = self._prev_ns = self._last_read_ns = at_ns
        power = self.engine.power
        if power is not None:
            power.start(self.cpu)
        counters = self.counters
        self._checked = not (counters.counts_only_keys and CHECKED_KEYS.isdisjoint(counters.keys))
        self._package = power.package_only(self.cpu) if power is not None else None
        self.started = True

    def accumulate(self) -> None:
        """Add up the counts so far (narrow counters, between deadlines); the next sample reports them."""
        self._last_read_ns = self.counters.accumulate()

    def take(self) -> Sample:
        return self.publish(self.counters.read())

    def publish(self, reading: Reading, msr: tuple[list[int], int] | None = None) -> Sample:
        """Turn one reading into this CPU's next Sample and push it into the ring. `msr`: the power monitor's
        registers of this interval as the native sampler thread read them (PowerMonitor.sample)."""
        self._last_read_ns = reading.at_ns
        interval = (reading.at_ns - self._prev_ns) / NS
        self._prev_ns = reading.at_ns
        tsc_hz = None
        if reading.tsc is not None:
            self._tsc_total += reading.tsc
            elapsed = (reading.at_ns - self._t0_ns) / NS
            tsc_hz = self._tsc_total / elapsed if elapsed > 0 and self._tsc_total else None
        suspect = reading.suspect or (impossible(reading.counts, reading.tsc, tsc_hz) if self._checked else None)
        power = self.engine.power
        extra: dict[str, Any]
        if power is None:
            extra = {}
        elif self._package is not None:  # what power.sample() gives for this CPU, without the call
            extra = {"package": self._package, "power_src": {}}
        elif msr is None:  # the Python samplers: the power monitor reads its registers itself
            extra = power.sample(self.cpu, interval, tsc_hz)
        else:
            extra = power.sample(self.cpu, interval, tsc_hz, msr)
        sample = Sample(
            cpu=self.cpu,
            seq=self.ring.count + 1,
            time=(reading.at_ns - self.engine.start_ns) / NS,
            interval=interval,
            tsc=reading.tsc,
            tsc_hz=tsc_hz,
            counts=reading.counts,
            overflows=reading.overflows,
            suspect=suspect,
            estimated=reading.estimated,
            util=reading.util,
            topdown=self.counters.topdown_method,
            **extra,
        )
        self.ring.push(sample)
        return sample

    def fail(self, e: BaseException) -> None:
        self.error = str(e) if isinstance(e, PmutopError) else f"cpu {self.cpu}: internal error: {e} (a bug in pmutop)"
        self.ring.push(
            Sample(
                cpu=self.cpu,
                seq=self.ring.count + 1,
                time=(self.engine.clock.now_ns() - self.engine.start_ns) / NS,
                interval=0.0,
                tsc=None,
                tsc_hz=None,
                counts={},
                error=self.error,
            )
        )


class _Waiter:
    """One wait_for_samples call: the CPUs it still waits for, and how it is woken."""

    __slots__ = ("event", "missing", "need")

    def __init__(self, need: dict[int, int], missing: set[int]) -> None:
        self.need = need
        self.missing = missing
        self.event = threading.Event()


class Engine:
    """Owns the backend, the undo log, one sampler per CPU and their rings."""

    def __init__(
        self,
        backend: Backend,
        platform: Platform,
        clock: Clock,
        cpus: list[int],
        interval: float,
        *,
        ring_capacity: int = 600,
        threaded: bool = True,
        undo: UndoLog | None = None,
        power: PowerMonitor | None = None,
        native: bool | None = None,
    ) -> None:
        """`native`: where the backend and the shim allow it, a threaded engine reads with native threads and
        one Python thread drains them (pmutop.engine.native_samplers), and simulated CPUs are all sampled by one
        Python thread (pmutop.engine.one_thread); False: the Python drive wherever.
        None (the default): native unless the environment says PMUTOP_SAMPLERS=python (the benchmarks
        compare the two in the live view that way)."""
        if interval <= 0:
            raise ValueError("interval must be > 0")
        self.backend = backend
        self.platform = platform
        self.clock = clock
        self.cpus = cpus
        self.threaded = threaded
        self.native = native if native is not None else os.environ.get(SAMPLERS_ENV, "") != "python"
        self._native: NativeDrive | None = None  # the native threads and their drain, when used
        self._one_thread: OneThreadDrive | None = None  # the thread sampling every simulated CPU, when used
        # How the CPUs are read, once started: "native threads", or one Python thread and why (a user can ask
        # why the read path costs more: top-down through PERF_METRICS, rotation, narrow counters, no shim).
        self.sampler_mode = "not started"
        self.undo = undo if undo is not None else UndoLog()
        self.power = power  # frequency, idle, temperature, energy beside the counters (optional)
        self.rings = {cpu: SampleRing(ring_capacity) for cpu in cpus}
        self.samplers: dict[int, Sampler] = {}
        self.epoch_ns = 0  # where the deadline schedule starts (moves when the interval changes)
        self.start_ns = 0  # when counting started: sample times and elapsed time count from here
        self.stopping = False
        self._interval_ns = round(interval * NS)
        self._gen = 0
        # (epoch, interval, generation), replaced whole so samplers read it without a lock.
        self._schedule = (0, self._interval_ns, 0)
        self._cond = threading.Condition()  # start-up, go, stop and schedule changes (never in steady state)
        self._waiters: list[_Waiter] = []
        self._waiters_lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._next = (0, 1)  # unthreaded tick_on_schedule: (generation, k) of the next deadline
        # ...which sleeps on this held lock (one futex wait, cheaper than an Event); wake_waiters releases it.
        self._tick_wake = threading.Lock()
        self._tick_wake.acquire()

    @property
    def interval(self) -> float:
        return self._interval_ns / NS

    # -- lifecycle

    def start(self, stop: threading.Event | None = None) -> None:
        """Prepare the backend, program every CPU (in its sampler thread), then start the clock.

        Raises the first CPU's failure; the caller must call stop() in any case (it restores).
        `stop` set meanwhile ends the wait for the samplers early."""
        self.backend.prepare(self.cpus, self.undo)
        for cpu in self.cpus:
            self.samplers[cpu] = Sampler(self, cpu, self.backend.counters(cpu), self.rings[cpu])
        if not self.threaded:
            self.sampler_mode = "one thread for every CPU (unthreaded engine)"
            for sampler in self.samplers.values():
                sampler.start_counting()
            self.epoch_ns = self.start_ns = self._counting_since()
            self._schedule = (self.epoch_ns, self._interval_ns, self._gen)
            return
        if self.platform.simulated:
            why = "simulated CPUs, nothing to pin a sampler to"
        else:
            asked = f"asked for ({SAMPLERS_ENV}=python or native=False)"
            drive = NativeDrive.for_engine(self) if self.native else asked
            if not isinstance(drive, str):
                self.sampler_mode = "native threads"
                self._native = drive
                self._native.start(stop, START_TIMEOUT_S)
                if self._native.thread is not None:
                    self._threads.append(self._native.thread)
                return
            why = drive
        self.sampler_mode = f"one Python thread for every CPU: {why}"
        self._one_thread = OneThreadDrive(self)
        self._one_thread.start(stop, START_TIMEOUT_S)
        if self._one_thread.thread is not None:
            self._threads.append(self._one_thread.thread)

    def begin_schedule(self) -> None:
        """Every CPU counts: the schedule starts at the earliest counter start, and the samplers go."""
        with self._cond:
            self.epoch_ns = self.start_ns = self._counting_since()
            self._schedule = (self.epoch_ns, self._interval_ns, self._gen)

    def _counting_since(self) -> int:
        """The run's start: the earliest counter start. Each CPU's first interval counts from its own start, so
        times (and the schedule) count from the earliest one: no record then covers more than the run so far."""
        starts = [s.counting_since_ns for s in self.samplers.values() if s.started]
        return min(starts) if starts else self.clock.now_ns()

    def stop(self) -> RestoreResult:
        """Stop sampling and put everything back (exactly once; any thread). Returns what could not be
        restored and what the user should know."""
        with self._cond:
            self.stopping = True
        self._wake_samplers()
        self.wake_waiters()
        deadline = time.monotonic() + JOIN_TIMEOUT_S
        if self._native is not None:
            self._native.stop(JOIN_TIMEOUT_S)
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(timeout=max(0.0, deadline - time.monotonic()))
        if self.power is not None:
            self.power.close()
        result = self.undo.run()
        self.platform.release_files()  # the CPUID files prepare read (opened again if anyone reads more)
        return result

    # -- used by the samplers

    def schedule(self) -> tuple[int, int, int]:
        """(epoch, interval, generation): one tuple, read without a lock."""
        return self._schedule

    def _wake_samplers(self) -> None:
        if self._one_thread is not None:
            self._one_thread.wake()

    def published(self, cpu: int, seq: int | None) -> None:
        """A sampler pushed sample `seq` (None: it failed, which is news too); wakes the readers this
        completes. Costs one list check per sample while nobody waits."""
        if not self._waiters:
            return
        self.published_many([(cpu, seq)])

    def published_many(self, published: list[tuple[int, int | None]]) -> None:
        """published() for several CPUs at once (the native drain: one lock per interval, not per CPU)."""
        if not self._waiters:
            return
        with self._waiters_lock:
            for w in self._waiters:
                for cpu, seq in published:
                    if cpu in w.missing and (seq is None or seq > w.need[cpu]):
                        w.missing.discard(cpu)
                        if not w.missing:
                            w.event.set()

    def wake_waiters(self) -> None:
        """End every wait_for_samples now (they then check their stop event): call when stopping."""
        with self._waiters_lock:
            for w in self._waiters:
                w.event.set()
        self._wake_tick()

    def _wake_tick(self) -> None:
        """End tick_on_schedule's sleep (it then looks at the stop flags and the schedule again)."""
        with self._waiters_lock:  # one releaser at a time: never a release of an unlocked lock
            if self._tick_wake.locked():
                self._tick_wake.release()

    # -- control

    def set_interval(self, seconds: float) -> None:
        if seconds <= 0:
            raise ValueError("interval must be > 0")
        with self._cond:
            self._interval_ns = round(seconds * NS)
            self.epoch_ns = self.clock.now_ns()
            self._gen += 1
            self._schedule = (self.epoch_ns, self._interval_ns, self._gen)
            self._cond.notify_all()
        if self._native is not None:
            self._native.reschedule(self.epoch_ns, self._interval_ns)
        self._wake_samplers()
        self._wake_tick()

    def tick(self) -> list[Sample]:
        """Unthreaded engines only: every CPU takes one sample now (tests and screenshots)."""
        assert not self.threaded
        out = []
        for sampler in self.samplers.values():
            if sampler.error is None:
                try:
                    sample = sampler.take()
                    out.append(sample)
                    if self._waiters:  # published()'s own test, here: a batch tick has no waiters
                        self.published(sampler.cpu, sample.seq)
                except Exception as e:
                    sampler.fail(e)
                    self.published(sampler.cpu, None)
        return out

    def tick_on_schedule(self, stop: threading.Event | None = None) -> bool:
        """Unthreaded engines: sleep until the schedule's next deadline, then tick (one thread reads every
        CPU, like `perf stat -I`: no sampler thread to wake). Deadlines already past are skipped, as the
        samplers skip them. False, without a tick, when stopping or `stop` is set first (whoever sets it
        calls wake_waiters, which ends the sleep)."""
        assert not self.threaded
        while True:
            if self.stopping or (stop is not None and stop.is_set()):
                return False
            epoch, interval_ns, gen = self._schedule  # again after a wake-up: set_interval wakes it too
            deadline_index = self._next[1] if self._next[0] == gen else 1
            remaining = epoch + deadline_index * interval_ns - self.clock.now_ns()
            if remaining <= 0:
                break
            self._tick_wake.acquire(timeout=remaining / NS)
        self.tick()
        self._next = (gen, max(deadline_index + 1, (self.clock.now_ns() - epoch) // interval_ns + 1))
        return True

    @property
    def accumulate_period_ns(self) -> int | None:
        """The shortest accumulate period of the CPUs' counters; None when no CPU needs accumulating."""
        periods = [sampler.counters.accumulate_period_ns for sampler in self.samplers.values()]
        return min((p for p in periods if p is not None), default=None)

    def accumulate(self) -> None:
        """Unthreaded engines only: every CPU whose counters need it adds up its counts now (what sampler
        threads do every accumulate period; tests step it with a manual clock)."""
        assert not self.threaded
        for sampler in self.samplers.values():
            if sampler.error is None and sampler.counters.accumulate_period_ns is not None:
                try:
                    sampler.accumulate()
                except Exception as e:
                    sampler.fail(e)

    def failures(self) -> dict[int, str]:
        return {cpu: sampler.error for cpu, sampler in self.samplers.items() if sampler.error}

    # -- the read-only face sinks use (pmutop.core.feed.SampleFeed)

    def keys(self, cpu: int) -> list[str]:
        return self.backend.counters(cpu).keys

    def topdown_method(self, cpu: int) -> str | None:
        return self.backend.topdown_method(cpu)

    def elapsed(self) -> float:
        return max(0, self.clock.now_ns() - self.start_ns) / NS if self.start_ns else 0.0

    def wait_for_samples(
        self,
        counts: dict[int, int],
        timeout: float,
        on_wait: Callable[[], None] | None = None,
        stop: threading.Event | None = None,
    ) -> bool:
        """Block until every live CPU in `counts` has a ring holding more than counts[cpu] samples, or
        `timeout` real seconds, or `stop` is set. A CPU that failed counts as ready (its error is the news).

        No polling: the sample that completes the wait wakes it; whoever sets `stop` should call
        wake_waiters() (Engine.stop does). `on_wait` runs after every wake-up that was not the end."""
        deadline = time.monotonic_ns() + round(timeout * NS)  # not the engine clock: that may be manual
        waiter = _Waiter(dict(counts), set())
        with self._waiters_lock:
            # Registered before the rings are checked: a sampler that pushes after the check then sees the
            # waiter (published() looks at the list after its push).
            self._waiters.append(waiter)
            waiter.missing = {c for c in counts if not self._ready_for(c, counts[c])}
        try:
            if not waiter.missing:
                return True
            while True:
                if self.stopping or (stop is not None and stop.is_set()):
                    return False
                remaining = deadline - time.monotonic_ns()
                if remaining <= 0:
                    return False
                if waiter.event.wait(remaining / NS):
                    with self._waiters_lock:
                        waiter.missing = {c for c in waiter.missing if not self._ready_for(c, counts[c])}
                        if not waiter.missing:
                            return True
                        waiter.event.clear()
                if on_wait:
                    on_wait()
        finally:
            with self._waiters_lock:
                self._waiters.remove(waiter)

    def _ready_for(self, cpu: int, count: int) -> bool:
        sampler = self.samplers.get(cpu)
        return (sampler is not None and sampler.error is not None) or self.rings[cpu].count > count
