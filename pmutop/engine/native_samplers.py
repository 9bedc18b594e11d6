"""The engine's native mode: one native thread per CPU reads (pmutop.hw.native_sampler), one Python thread
drains every CPU's reading once per interval and publishes the Samples (one reader wake-up per interval).

Used where every CPU's counters can say what a native thread reads (MsrCpuCounters.native_core: the msr
backend on MSR files, without rotation, PERF_METRICS or narrow counters), the shim is built and the clock is
the real monotonic one; otherwise the engine runs its Python drive. Programming happens here, once
per CPU, before the threads start; the arithmetic, the GLOBAL_STATUS clearing, the foreign-use check and the
restore stay in Python (MsrCpuCounters). A CPU whose read or arithmetic fails is dropped alone.

Each native thread also reads its CPU's power registers (PowerMonitor.msr_registers: APERF, MPERF, TSC, the
C-state residencies, thermal status, RAPL energy) right after its counters, on the same deadline, where they
are in the same msr file; the drain hands their values to the power monitor, which then reads nothing itself.
A power register that fails is missing from that interval, as when the power monitor reads it.
"""

from __future__ import annotations

import errno
import os
import threading
import time
from collections.abc import Mapping
from typing import Protocol

from pmutop.backends.base import CpuCounters, Reading
from pmutop.backends.msr.counters import FOREIGN_CHECK_NS
from pmutop.core.clock import Clock, MonotonicClock
from pmutop.core.errors import HardwareError
from pmutop.core.sample import Sample
from pmutop.core.user_turn import USER_TURN
from pmutop.hw import native_sampler
from pmutop.hw.msr import MsrAccessError, MsrDevice, MsrFile
from pmutop.hw.native_sampler import NativeCore, NativeReading, NativeSamplerGroup
from pmutop.hw.platform import Platform
from pmutop.probes.power.monitor import MAX_MSR_REGISTERS

NS = 1_000_000_000


class Sampler(Protocol):
    """What the drive uses of pmutop.engine.engine.Sampler (a protocol: the engine imports this module)."""

    cpu: int
    counters: CpuCounters
    error: str | None

    def fail(self, e: BaseException) -> None: ...
    def started_at(self, at_ns: int) -> None: ...
    def publish(self, reading: Reading, msr: tuple[list[int], int] | None = None) -> Sample: ...


class PowerSource(Protocol):
    """What the drive uses of pmutop.probes.power.monitor.PowerMonitor."""

    def msr_registers(self, cpu: int) -> tuple[MsrDevice, tuple[int, ...]] | None: ...


class Engine(Protocol):
    """What the drive uses of pmutop.engine.engine.Engine."""

    clock: Clock
    platform: Platform
    stopping: bool

    @property
    def power(self) -> PowerSource | None: ...

    @property
    def samplers(self) -> Mapping[int, Sampler]: ...
    def schedule(self) -> tuple[int, int, int]: ...
    def begin_schedule(self) -> None: ...
    def published_many(self, published: list[tuple[int, int | None]]) -> None: ...


class NativeCounters(Protocol):
    """What MsrCpuCounters offers the native mode."""

    def program(self) -> None: ...
    def python_only(self) -> str | None: ...
    def native_core(self, pin: bool) -> NativeCore | None: ...
    def start_native(self, at: int, tsc: int, values: list[int]) -> None: ...
    def native_checks(self) -> list[tuple[int, int, int]]: ...
    def read_from(self, at: int, tsc: int, values: list[int], status: int, foreign: int | None) -> Reading: ...


def _native(counters: CpuCounters) -> NativeCounters | None:
    return counters if hasattr(counters, "native_core") else None  # type: ignore[return-value]


class NativeDrive:
    """The native threads of one engine and the Python thread that drains them."""

    def __init__(self, engine: Engine, samplers: list[Sampler], cores: list[NativeCore]) -> None:
        self.engine = engine
        self.samplers = samplers
        self.counters: list[NativeCounters] = [_native(s.counters) for s in samplers]  # type: ignore[misc]
        # Room for the power monitor's registers beside each core's counters (read from the same file).
        self.group = NativeSamplerGroup(cores, MAX_MSR_REGISTERS if engine.power is not None else 0)
        self.thread: threading.Thread | None = None
        self._seen = [1] * len(samplers)  # readings of each core handled (1: its baseline)
        self._live = [True] * len(samplers)
        self._power = [False] * len(samplers)  # the thread reads the CPU's power registers too

    @classmethod
    def for_engine(cls, engine: Engine) -> NativeDrive | str:
        """A drive when every CPU can be read natively, else why not (nothing started, nothing written): the
        Python drive then does the same work, at more CPU time (pmutop.engine.one_thread)."""
        if not native_sampler.available():
            return "the shim is built without the native samplers"
        if not isinstance(engine.clock, MonotonicClock):
            return "the engine's clock is not the monotonic clock the native threads keep"
        samplers = list(engine.samplers.values())
        if not samplers:
            return "no CPU to read"
        cores = []
        for sampler in samplers:
            counters = _native(sampler.counters)
            if counters is None:
                return "this backend's counters are read by Python"
            why = counters.python_only()
            core = counters.native_core(engine.platform.pins_threads) if why is None else None
            if core is None:
                return f"cpu {sampler.cpu}: {why or 'no native reading'}"
            cores.append(core)
        try:
            return cls(engine, samplers, cores)
        except OSError as e:
            return f"cannot set up the native samplers: {e.strerror or e}"

    def start(self, stop: threading.Event | None, timeout_s: float) -> None:
        """Program every CPU, start the threads, take their baselines, set the schedule, start draining.
        Raises the first CPU's failure (the caller restores, as after the Python samplers' start)."""
        engine = self.engine
        for sampler, counters in zip(self.samplers, self.counters, strict=True):
            try:
                counters.program()
            except BaseException as e:
                sampler.fail(e)
        self._raise_failure()
        try:
            for i, counters in enumerate(self.counters):
                self.group.set_checks(i, counters.native_checks(), FOREIGN_CHECK_NS)
            self.group.start()
        except OSError as e:
            raise HardwareError(f"cannot start the sampler threads: {e.strerror or e} (check `ulimit -u`)") from None
        deadline = time.monotonic_ns() + round(timeout_s * NS)
        need = [1] * len(self.samplers)
        while self.group.wait(need, min(deadline, time.monotonic_ns() + NS // 20)) != 0:
            if stop is not None and stop.is_set():
                return
            if time.monotonic_ns() >= deadline:
                raise HardwareError(f"samplers did not start within {timeout_s:.0f} s")
        for i, (sampler, reading) in enumerate(zip(self.samplers, self.group.read(), strict=True)):
            try:
                self._check(sampler, reading)
                self.counters[i].start_native(reading.at_ns, reading.tsc, reading.values)
                sampler.started_at(reading.at_ns)
            except BaseException as e:
                sampler.fail(e)
                self._drop(i)
        self._raise_failure()
        for i in range(len(self.samplers)):
            if self._live[i]:
                self._read_power_natively(i)
        engine.begin_schedule()
        epoch, interval_ns, _ = engine.schedule()
        self.group.schedule(epoch, interval_ns)
        self.thread = threading.Thread(target=self.run, name="pmutop-samplers", daemon=True)
        self.thread.start()

    def _read_power_natively(self, i: int) -> None:
        """Core i's thread reads its CPU's power registers from now on, where the power monitor reads them from
        the same msr file as the counters (after started_at: the power monitor has probed which answer)."""
        power = self.engine.power
        found = power.msr_registers(self.samplers[i].cpu) if power is not None else None
        if found is None:
            return
        dev, addresses = found
        if not isinstance(dev, MsrFile) or dev.fd < 0 or not _same_file(dev.fd, self.group.cores[i].fd):
            return  # the power monitor goes on reading them itself
        try:
            self.group.set_extra(i, list(addresses))
        except OSError:
            return
        self._power[i] = True

    def _raise_failure(self) -> None:
        failed = [sampler.error for sampler in self.samplers if sampler.error]
        if failed:
            raise HardwareError(failed[0])

    @staticmethod
    def _check(sampler: Sampler, reading: NativeReading) -> None:
        if reading.failed_address == native_sampler.PIN_FAILED and reading.errno:  # as pin_current_thread says it
            raise HardwareError(f"cannot pin a thread to cpu {sampler.cpu}: {os.strerror(reading.errno)}")
        if reading.errno == native_sampler.SHORT_READ:  # as MsrFile says it
            raise MsrAccessError(sampler.cpu, reading.failed_address, "read", errno.EIO, "no such register")
        if reading.errno:
            raise MsrAccessError(sampler.cpu, reading.failed_address, "read", reading.errno)

    def _drop(self, i: int) -> None:
        self._live[i] = False
        self.group.stop_core(i)

    def reschedule(self, epoch_ns: int, interval_ns: int) -> None:
        self.group.schedule(epoch_ns, interval_ns)  # also ends the drain's wait: it looks at the schedule again

    def run(self) -> None:
        """Thread body: wait until every live CPU read at the next deadline (or half an interval past it),
        then turn each new reading into a Sample; the readers waiting for them are woken once."""
        engine, group = self.engine, self.group
        try:
            while not engine.stopping:
                epoch, interval_ns, _ = engine.schedule()
                now = time.monotonic_ns()
                deadline = epoch + ((now - epoch) // interval_ns + 1) * interval_ns
                need = [seen + 1 if live else 0 for seen, live in zip(self._seen, self._live, strict=True)]
                if group.wait(need, deadline + max(interval_ns // 2, NS // 100)) == 2 and engine.stopping:
                    return
                self.drain()
        except BaseException as e:  # a bug here must not leave the CPUs silently unread
            for i, sampler in enumerate(self.samplers):
                if self._live[i]:
                    sampler.fail(e)
                    self._drop(i)
            engine.published_many([(sampler.cpu, None) for sampler in self.samplers])

    def drain(self) -> None:
        published: list[tuple[int, int | None]] = []
        seen, live, power = self._seen, self._live, self._power
        for i, reading in enumerate(self.group.read()):
            count, at, status, err, _, checked, foreign, extra_failed, tsc, values, extra = reading
            if count <= seen[i] or not live[i]:
                continue
            seen[i] = count
            USER_TURN.wait()  # a key being answered goes first (the readings are taken already)
            sampler = self.samplers[i]
            try:
                if err:
                    self._check(sampler, reading)
                counted = self.counters[i].read_from(at, tsc, values, status, foreign if checked else None)
                sample = sampler.publish(counted, (extra, extra_failed) if power[i] else None)
                published.append((sampler.cpu, sample.seq))
            except Exception as e:
                sampler.fail(e)
                self._drop(i)
                published.append((sampler.cpu, None))
        if published:
            self.engine.published_many(published)

    def stop(self, timeout_s: float) -> None:
        """End the drain and the native threads (at most timeout_s in all): before the restore."""
        deadline = time.monotonic() + timeout_s
        self.group.kick()
        if self.thread is not None and self.thread is not threading.current_thread():
            self.thread.join(timeout=max(0.0, deadline - time.monotonic()))
        drained = self.thread is None or not self.thread.is_alive()
        self.group.stop(max(0.0, deadline - time.monotonic()), free=drained)


def _same_file(a: int, b: int) -> bool:
    first, second = os.fstat(a), os.fstat(b)
    return (first.st_dev, first.st_ino, first.st_rdev) == (second.st_dev, second.st_ino, second.st_rdev)
