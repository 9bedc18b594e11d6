"""Sampler read path: the CPU time of one core-sample between two ticks (counter read, GLOBAL_STATUS check,
delta math, ring insert), and how many register reads and shim calls it takes.

Three set-ups, measured side by side:
* sim: the simulated PMU (its rdpmc reader); the time includes the simulator's workload model.
* sysroot-msr: an msr sysroot of plain files (tests/sysroot_builder.py), counters read with one pread each.
* sysroot-rdpmc: the same sysroot with the counters read by a fake shim, one call per read (as the real
  rdpmc shim does), GLOBAL_STATUS still through the MSR file.
Plus the threaded engine on the simulated PMU (one pinned thread per core, real clock): process CPU time
per core-sample, against the same CPUs driven by one thread (tick).

And the real read path as it grows (threaded_sysroot): the threaded engine on an msr sysroot of 4, 64 and
256 CPUs at 1 s, the stand-in PMU (pmu_emulator.py) in another process moving the counters, one reader
draining every interval as the live view does; CPU seconds per minute of this process, with pmutop's
default, the native samplers (pmutop.engine.native_samplers), and one Python thread per CPU, alternated.
The threaded figures run the power monitor as pmutop does (its MSRs, beside the counters, every interval).
"""

from __future__ import annotations

import os
import resource
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks import readpath
from benchmarks.stats import summary
from pmutop.backends.msr.backend import MsrBackend
from pmutop.backends.sim import SimBackend
from pmutop.core.clock import ManualClock, MonotonicClock
from pmutop.core.sysroot import Sysroot
from pmutop.engine.engine import Engine
from pmutop.hw import native_sampler
from pmutop.hw.platform import HostPlatform
from pmutop.pmu import registers
from pmutop.probes.power.monitor import PowerMonitor
from pmutop.sim.model import SimConfig
from pmutop.sim.platform import SimPlatform

ROOT = Path(__file__).resolve().parent.parent


def _sysroot_builder():  # type: ignore[no-untyped-def]
    sys.path.insert(0, str(ROOT / "tests"))
    from helpers import sysroot_builder

    return sysroot_builder


class _Counting:
    def __init__(self) -> None:
        self.msr_reads = 0
        self.status_reads = 0  # IA32_PERF_GLOBAL_STATUS: the overflow check of every sample
        self.shim_calls = 0


def _count_msr_reads(engine: Engine, counting: _Counting) -> None:
    for s in engine.samplers.values():
        dev = s.counters.setup.dev  # type: ignore[attr-defined]
        raw = dev._read_raw

        def counted(address: int, raw=raw) -> int:  # type: ignore[no-untyped-def]
            counting.msr_reads += 1
            counting.status_reads += address == registers.IA32_PERF_GLOBAL_STATUS
            return raw(address)

        dev._read_raw = counted
        many = dev.read_many

        def counted_many(addresses: tuple[int, ...], many=many) -> list[int | None]:  # type: ignore[no-untyped-def]
            # Several registers read at once (MsrDevice.read_many: one call on the simulator) count one each.
            counting.msr_reads += len(addresses)
            counting.status_reads += addresses.count(registers.IA32_PERF_GLOBAL_STATUS)
            return many(addresses)

        dev.read_many = counted_many


class _FileShimReader:
    """A stand-in for the rdpmc shim on a sysroot: everything in one call (counted), from the MSR file."""

    method = "rdpmc"

    def __init__(self, path: Path, n_fixed: int, n_gp: int, counting: _Counting) -> None:
        self._fd = os.open(path, os.O_RDONLY)
        self._addresses = [registers.IA32_TIME_STAMP_COUNTER] + [registers.fixed_ctr(i) for i in range(n_fixed)]
        self._addresses += [registers.pmc(i) for i in range(n_gp)]
        self._counting = counting

    def read(self) -> tuple[int, list[int]]:
        self._counting.shim_calls += 1
        lo, hi = min(self._addresses), max(self._addresses)
        data = os.pread(self._fd, (hi - lo + 1) * 8, lo * 8)  # one syscall, as one shim call
        values = [int.from_bytes(data[(a - lo) * 8 : (a - lo) * 8 + 8], "little") for a in self._addresses]
        return values[0], values[1:]


def _make(kind: str, cpus: int, clock: ManualClock, tmp: Path, counting: _Counting) -> Engine:
    if kind == "sim":
        platform: Any = SimPlatform(SimConfig(cpus=cpus, seed=1, model="skx"), clock)
        real = platform.rdpmc_reader

        def reader(cpu: int, n_fixed: int, n_gp: int, metrics: bool = False):  # type: ignore[no-untyped-def]
            r = real(cpu, n_fixed, n_gp, metrics)
            read = r.read

            def counted():  # type: ignore[no-untyped-def]
                counting.shim_calls += 1
                return read()

            r.read = counted
            return r

        platform.rdpmc_reader = reader
        backend: Any = SimBackend(platform, clock)
    else:
        b = _sysroot_builder()
        root = tmp / kind
        b.build_sysroot(root, list(range(cpus)), b.SKYLAKE_X_LEAVES, msrs=b.idle_pmu_registers())
        platform = HostPlatform(Sysroot(root))
        platform.pins_threads = False
        backend = MsrBackend(platform, clock, read_method="msr")
        if kind == "sysroot-rdpmc":
            backend._choose_read_method = lambda cpus, undo: "rdpmc"
            platform.rdpmc_reader = lambda cpu, f, g, metrics=False: _FileShimReader(
                root / f"dev/cpu/{cpu}/msr", f, g, counting
            )
    engine = Engine(backend, platform, clock, list(range(cpus)), 1.0, threaded=False)
    engine.start()
    return engine


def read_path(cpus: int = 64, ticks: int = 10, repeat: int = 5) -> dict[str, Any]:
    """µs of this thread's CPU time per core-sample of engine.tick(), per set-up."""
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="pmutop-bench-") as tmp:
        for kind in ("sim", "sysroot-msr", "sysroot-rdpmc"):
            clock = ManualClock(1_000_000_000)
            counting = _Counting()
            engine = _make(kind, cpus, clock, Path(tmp), counting)
            try:
                _count_msr_reads(engine, counting)
                clock.advance(1.0)
                engine.tick()  # warm up
                per_sample: list[float] = []
                counting.msr_reads = counting.status_reads = counting.shim_calls = 0
                for _ in range(repeat):
                    t0 = time.thread_time_ns()
                    for _ in range(ticks):
                        clock.advance(1.0)
                        engine.tick()
                    per_sample.append((time.thread_time_ns() - t0) / 1000 / (ticks * cpus))
                n = repeat * ticks * cpus
                out[f"sampler {kind}"] = summary(
                    per_sample,
                    "us/core-sample",
                    cpus=cpus,
                    msr_reads_per_sample=counting.msr_reads / n,
                    # The rest: the control registers, re-read every 2 s to spot another agent's writes.
                    status_reads_per_sample=counting.status_reads / n,
                    shim_calls_per_sample=counting.shim_calls / n,
                    read_method=engine.backend.read_method,
                )
            finally:
                engine.stop()
    return out


def native_read_path(cpus: int = 64, seconds: float = 2.0, repeat: int = 3, interval: float = 0.1) -> dict[str, Any]:
    """µs of process CPU time per core-sample of pmutop's default read path on the same msr sysroot: the
    native sampler threads (their preads of the counters, GLOBAL_STATUS and the power monitor's MSRs) and the
    Python drain that turns their readings into Samples (delta math, power fields, ring insert), on a real
    clock."""
    if not native_sampler.available():
        return {"sampler sysroot-msr native (default)": {"skipped": "the shim is built without the native samplers"}}
    per_sample: list[float] = []
    with tempfile.TemporaryDirectory(prefix="pmutop-bench-") as tmp:
        b = _sysroot_builder()
        root = Path(tmp)
        b.build_sysroot(root, list(range(cpus)), b.SKYLAKE_X_LEAVES, msrs=b.idle_pmu_registers())
        for _ in range(repeat):
            clock = MonotonicClock()
            platform = HostPlatform(Sysroot(root))
            power = PowerMonitor.for_platform(platform, list(range(cpus)))
            backend = MsrBackend(platform, clock)
            engine = Engine(backend, platform, clock, list(range(cpus)), interval, native=True, power=power)
            try:
                engine.start()
                engine.wait_for_samples(dict.fromkeys(engine.cpus, 0), timeout=30)
                before = sum(r.count for r in engine.rings.values())
                t0 = _cpu_s()
                time.sleep(seconds)
                spent = _cpu_s() - t0
                got = sum(r.count for r in engine.rings.values()) - before
            finally:
                engine.stop()
            per_sample.append(spent / max(got, 1) * 1e6)
    return {
        "sampler sysroot-msr native (default)": summary(
            per_sample, "us/core-sample", cpus=cpus, interval=interval, read_method="native threads, msr file"
        )
    }


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def threaded(cpus: int = 256, seconds: float = 5.0, repeat: int = 3, interval: float = 0.5) -> dict[str, Any]:
    """Process CPU time per core-sample: the engine's Python drive (its own thread, on a real clock, waking at
    each deadline), against the caller's thread taking the same samples (tick)."""
    out: dict[str, Any] = {}
    per_threaded: list[float] = []
    per_single: list[float] = []
    for _ in range(repeat):
        clock = MonotonicClock()
        platform = SimPlatform(SimConfig(cpus=cpus, seed=1, model="skx"), clock)
        engine = Engine(SimBackend(platform, clock), platform, clock, list(range(cpus)), interval, native=False)
        try:
            engine.start()
            engine.wait_for_samples(dict.fromkeys(engine.cpus, 0), timeout=30)
            before = {c: r.count for c, r in engine.rings.items()}
            t0 = _cpu_s()
            time.sleep(seconds)
            spent = _cpu_s() - t0
            got = sum(engine.rings[c].count - before[c] for c in engine.cpus)
        finally:
            engine.stop()
        per_threaded.append(spent / max(got, 1) * 1e6)
        engine = Engine(SimBackend(platform, clock), platform, clock, list(range(cpus)), interval, threaded=False)
        try:
            engine.start()
            engine.tick()
            t0 = _cpu_s()
            rounds = max(1, round(seconds / interval))
            for _ in range(rounds):
                time.sleep(interval)
                engine.tick()
            per_single.append((_cpu_s() - t0) / (rounds * cpus) * 1e6)
        finally:
            engine.stop()
    out["sampler sim threaded"] = summary(per_threaded, "us/core-sample", cpus=cpus, interval=interval)
    out["sampler sim one thread"] = summary(per_single, "us/core-sample", cpus=cpus, interval=interval)
    return out


def _read_path_cost(root: Path, cpus: int, seconds: float, native: bool) -> float:
    """CPU s per minute of this process: the threaded engine on the sysroot (with the power monitor, as pmutop
    runs it) and one reader draining it."""
    clock = MonotonicClock()
    platform = HostPlatform(Sysroot(root))
    power = PowerMonitor.for_platform(platform, list(range(cpus)))
    engine = Engine(MsrBackend(platform, clock), platform, clock, list(range(cpus)), 1.0, native=native, power=power)
    stop = threading.Event()

    def drain() -> None:  # what the live view does each interval: wait for every CPU, take the new samples
        seen = dict.fromkeys(engine.cpus, 0)
        while not stop.is_set():
            if engine.wait_for_samples(dict(seen), timeout=5, stop=stop):
                for cpu in engine.cpus:
                    seen[cpu] += len(engine.rings[cpu].since(seen[cpu]))

    reader = threading.Thread(target=drain, name="bench-reader", daemon=True)
    try:
        engine.start()
        if native and engine._native is None:
            raise RuntimeError("the native samplers did not start")
        reader.start()
        time.sleep(1.5)  # past the first interval
        t0, w0 = _cpu_s(), time.monotonic()
        time.sleep(seconds)
        return (_cpu_s() - t0) / (time.monotonic() - w0) * 60
    finally:
        stop.set()
        engine.wake_waiters()
        engine.stop()
        reader.join(timeout=5)


def threaded_sysroot(cpus: tuple[int, ...] = (4, 64, 256), seconds: float = 20.0, repeat: int = 2) -> dict[str, Any]:
    """CPU s/min of the read path on an emulated msr sysroot at 1 s (benchmarks/pmu_emulator.py, in another
    process): pmutop's default, native sampler threads (where the shim has them), against one Python thread
    per CPU, runs alternated; each figure also as a ratio to the same variant at the fewest CPUs."""
    variants = {"native (default)": True, "python": False}
    if not native_sampler.available():
        variants.pop("native (default)")
    runs: dict[tuple[str, int], list[float]] = {}
    for n in cpus:
        with readpath.emulated_sysroot(n) as root:
            for _ in range(repeat):
                for name, native in variants.items():
                    runs.setdefault((name, n), []).append(_read_path_cost(root, n, seconds, native))
    out: dict[str, Any] = {}
    for name in variants:
        base = summary(runs[(name, cpus[0])], "cpu-s/min")["median"]
        for n in cpus:
            r = summary(runs[(name, n)], "cpu-s/min", cpus=n, seconds=seconds, interval=1.0)
            if n != cpus[0]:
                r[f"ratio_to_{cpus[0]}"] = r["median"] / base if base else None
            out[f"read path {n} cpus {name}"] = r
    if not native_sampler.available():
        out["read path, native samplers"] = {"skipped": "the shim is built without the native samplers"}
    return out
