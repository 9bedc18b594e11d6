"""The engine's Python drive: one Python thread samples every CPU on the shared schedule, wherever the native
threads cannot read (simulated CPUs; top-down through PERF_METRICS, rotating event groups, counters that can
wrap within the interval, the perf backend, a shim without native samplers, PMUTOP_SAMPLERS=python).

A Python thread per CPU costs a wake-up and GIL hand-offs per CPU and interval (at 256 CPUs about twice the
sampling itself). So one thread sleeps until each deadline and then takes every CPU's sample through the backend
(Sampler.take: the counter read, GLOBAL_STATUS check and delta math per CPU), in CPU order. Where a CPU's
counters read only on that CPU (rdpmc) the thread moves onto it first; msr files and perf are read from where
the thread is. Simulated CPUs are each read at one instant of their simulated time
(Platform.one_instant). The readers waiting for the interval are woken once, after the last. Counters that can
wrap within the interval are read in between (accumulate). A CPU whose read fails is dropped alone.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Protocol

from pmutop.backends.base import CpuCounters
from pmutop.core.clock import Clock
from pmutop.core.errors import HardwareError
from pmutop.core.sample import Sample
from pmutop.core.user_turn import USER_TURN
from pmutop.hw.platform import Platform

NS = 1_000_000_000


class Sampler(Protocol):
    """What the drive uses of pmutop.engine.engine.Sampler (a protocol: the engine imports this module)."""

    cpu: int
    counters: CpuCounters
    error: str | None

    @property
    def last_read_ns(self) -> int: ...
    def fail(self, e: BaseException) -> None: ...
    def start_counting(self) -> None: ...
    def accumulate(self) -> None: ...
    def take(self) -> Sample: ...


class Engine(Protocol):
    """What the drive uses of pmutop.engine.engine.Engine."""

    clock: Clock
    platform: Platform
    stopping: bool

    @property
    def samplers(self) -> Mapping[int, Sampler]: ...
    def schedule(self) -> tuple[int, int, int]: ...
    def begin_schedule(self) -> None: ...
    def published_many(self, published: list[tuple[int, int | None]]) -> None: ...


class OneThreadDrive:
    """One thread that samples every CPU of an engine at each deadline of its schedule."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.samplers = list(engine.samplers.values())
        # The CPUs whose counters only read on that CPU (rdpmc): the thread moves onto each before touching them.
        # Others are read from where the thread is: moving onto a busy CPU would preempt its work every interval.
        self._own_cpu = {s.cpu for s in self.samplers if s.counters.reads_on_own_cpu}
        self.thread: threading.Thread | None = None
        self._wake = threading.Event()  # set on a schedule change or stop: the only way to end a sleep early
        self.early_wakeups = 0  # sleeps ended before their deadline (schedule change, stop)

    def start(self, stop: threading.Event | None = None, timeout_s: float = 20.0) -> None:
        """Start the thread: it programs every CPU (on that CPU where it reads there), sets the schedule, samples.
        Raises the first CPU's failure (the caller restores); `stop` set meanwhile ends the wait early."""
        programmed = threading.Event()
        thread = threading.Thread(
            target=self._program_then_run, args=(programmed,), name="pmutop-samplers", daemon=True
        )
        try:
            thread.start()
        except RuntimeError as e:  # "can't start new thread": out of threads or memory (ulimit -u)
            raise HardwareError(f"cannot start the sampler thread: {e} (check `ulimit -u`)") from None
        self.thread = thread
        waited = 0.0
        while not programmed.wait(0.05):
            waited += 0.05
            if stop is not None and stop.is_set():
                return
            if waited >= timeout_s:
                raise HardwareError(f"the CPUs were not programmed within {timeout_s:.0f} s")
        failed = [sampler.error for sampler in self.samplers if sampler.error]
        if failed:
            raise HardwareError(failed[0])

    def _program_then_run(self, programmed: threading.Event) -> None:
        """Thread body: program each CPU (the caller's thread stays where it was), then sample until stopped."""
        for sampler in self.samplers:
            if self.engine.stopping:
                break
            try:
                self._move_to(sampler.cpu)
                sampler.start_counting()
            except BaseException as e:
                sampler.fail(e)
        if self.engine.stopping or any(sampler.error for sampler in self.samplers):
            programmed.set()
            return
        self.engine.begin_schedule()
        programmed.set()
        self.run()

    def _move_to(self, cpu: int) -> None:
        if cpu in self._own_cpu:
            self.engine.platform.pin_current_thread(cpu)

    def wake(self) -> None:
        """End the current sleep (the schedule changed, or stopping): the thread looks at both again."""
        self._wake.set()

    def run(self) -> None:
        """Thread body: sample every live CPU at each deadline (skipping deadlines already past, as the
        sampler threads do) and, with narrow counters, accumulate every accumulate period in between."""
        engine = self.engine
        # (sampler, accumulate period) of the CPUs whose counters can wrap within the interval.
        narrow = [(s, p) for s in self.samplers if (p := s.counters.accumulate_period_ns) is not None]
        deadline_index, gen = 1, -1
        try:
            while not engine.stopping:
                epoch, interval_ns, schedule_gen = engine.schedule()
                if schedule_gen != gen:
                    deadline_index, gen = 1, schedule_gen
                deadline = epoch + deadline_index * interval_ns
                due = [(s, p) for s, p in narrow if s.error is None and s.last_read_ns + p < deadline]
                if due:
                    # Read before a counter could wrap twice; the deadlines stay where they are (no drift).
                    if self._sleep_until(min(s.last_read_ns + p for s, p in due), gen):
                        self._accumulate(due)
                    continue
                if not self._sleep_until(deadline, gen):
                    continue  # stopping, or the schedule changed while waiting
                self._take_all()
                now = engine.clock.now_ns()
                deadline_index = max(deadline_index + 1, (now - epoch) // interval_ns + 1)
        except BaseException as e:  # a bug here must not leave the CPUs silently unread
            live = [s for s in self.samplers if s.error is None]
            for sampler in live:
                sampler.fail(e)
            engine.published_many([(sampler.cpu, None) for sampler in live])

    def _take_all(self) -> None:
        published: list[tuple[int, int | None]] = []
        one_instant = self.engine.platform.one_instant
        for sampler in self.samplers:
            if self.engine.stopping:
                break  # the restore waits for this thread: no reason to read the rest first
            if sampler.error is not None:
                continue
            USER_TURN.wait()  # a key being answered goes first (between CPUs: each is read at its own instant)
            try:
                # One CPU's reads at one instant of its simulated time, as hardware answers them within a
                # microsecond (the simulator then evaluates its workload once for them all).
                self._move_to(sampler.cpu)
                with one_instant(sampler.cpu):
                    sample = sampler.take()
                published.append((sampler.cpu, sample.seq))
            except Exception as e:
                sampler.fail(e)
                published.append((sampler.cpu, None))
        if published:
            self.engine.published_many(published)

    def _accumulate(self, due: list[tuple[Sampler, int]]) -> None:
        """Accumulate the CPUs whose period is up (each on its own: their last reads differ)."""
        now = self.engine.clock.now_ns()
        failed: list[tuple[int, int | None]] = []
        for sampler, period in due:
            if sampler.error is None and sampler.last_read_ns + period <= now:
                try:
                    self._move_to(sampler.cpu)
                    sampler.accumulate()
                except Exception as e:
                    sampler.fail(e)
                    failed.append((sampler.cpu, None))
        if failed:
            self.engine.published_many(failed)

    def _sleep_until(self, deadline_ns: int, gen: int) -> bool:
        """Sleep until the deadline; False if stopping or the schedule changed."""
        engine, wake = self.engine, self._wake
        while True:
            # Cleared before the checks: a set() after them ends the wait below, one before is seen by them.
            wake.clear()
            if engine.stopping or engine.schedule()[2] != gen:
                self.early_wakeups += 1
                return False
            remaining = deadline_ns - engine.clock.now_ns()
            if remaining <= 0:
                return True
            wake.wait(remaining / NS)

    def stop(self, timeout_s: float) -> None:
        """End the thread (its sleep ends at once; a round of samples in progress finishes first)."""
        self.wake()
        thread = self.thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=max(0.0, timeout_s))
