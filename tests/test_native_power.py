"""The power registers on the native read path: each CPU's native sampler thread reads the power monitor's
MSRs (APERF, MPERF, TSC, C-state residencies, thermal status, RAPL energy) right after its counters, and the
power monitor turns them into the same Sample fields as when it reads them itself (the Python samplers).

msr sysroots of plain files: the engine runs with a one-hour interval until the test has written the
registers of the first interval, then samples at 0.05 s, so both read paths see exactly the same values."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from helpers.sysroot_builder import SKYLAKE_X_LEAVES, build_sysroot, idle_pmu_registers, write_msrs

from pmutop.backends.msr.backend import MsrBackend
from pmutop.core.clock import MonotonicClock
from pmutop.core.sample import Sample
from pmutop.core.sysroot import Sysroot
from pmutop.engine.engine import Engine
from pmutop.hw import native_sampler
from pmutop.hw.msr import MsrFile
from pmutop.hw.platform import HostPlatform
from pmutop.probes.power import regs
from pmutop.probes.power.monitor import PowerMonitor

pytestmark = pytest.mark.skipif(not native_sampler.available(), reason="the shim has no native samplers")

CPUS = [0, 1]
THERM = regs.THERM_READING_VALID | 40 << 16 | regs.THERM_STATUS_POWER_LIMIT
START = {
    regs.IA32_APERF: 1_000,
    regs.IA32_MPERF: 2_000,
    regs.MSR_CORE_C6_RESIDENCY: 3_000,
    regs.IA32_THERM_STATUS: THERM,
    regs.MSR_TEMPERATURE_TARGET: 95 << 16,
    regs.IA32_PACKAGE_THERM_STATUS: regs.THERM_READING_VALID | 30 << 16,
    regs.MSR_RAPL_POWER_UNIT: 0xA0E03,  # 1/16384 J
    regs.MSR_PKG_ENERGY_STATUS: 0xFFFFF000,
    regs.MSR_PP0_ENERGY_STATUS: 500,  # the highest address: every other one is inside the file
    regs.MSR_DRAM_ENERGY_STATUS: 700,
}
# The first interval: 2e9 TSC ticks, 30% busy at 1.5x the TSC rate, 40% in C6 (C3 and C7 stay 0: 30% C1).
FIRST = {
    regs.IA32_TIME_STAMP_COUNTER: 123_456_789 + 2_000_000_000,
    regs.IA32_APERF: 1_000 + 900_000_000,
    regs.IA32_MPERF: 2_000 + 600_000_000,
    regs.MSR_CORE_C6_RESIDENCY: 3_000 + 800_000_000,
    regs.IA32_THERM_STATUS: regs.THERM_READING_VALID | 35 << 16 | regs.THERM_STATUS_PROCHOT,
    regs.MSR_PKG_ENERGY_STATUS: 0x1000,  # wrapped: 0x2000 counts
    regs.MSR_PP0_ENERGY_STATUS: 500 + 16384,
    regs.MSR_DRAM_ENERGY_STATUS: 700 + 8192,
}
POWER_FIELDS = ("busy", "cstates", "temp_c", "throttle", "package", "pkg_temp_c", "energy_j", "power_src")


def first_interval(root: Path, *, native: bool, power_msr_path: Path | None = None) -> tuple[Engine, list[Sample]]:
    """Each CPU's first sample after START -> FIRST, on the native or the Python read path; the engine is
    stopped. `power_msr_path`: the power monitor reads this file rather than the CPU's msr file."""
    build_sysroot(root, CPUS, SKYLAKE_X_LEAVES, msrs=idle_pmu_registers() | START)
    clock = MonotonicClock()
    platform = HostPlatform(Sysroot(root))
    power = PowerMonitor.for_platform(platform, CPUS)
    if power_msr_path is not None:
        power = PowerMonitor(CPUS, sysroot=None, open_msr=lambda c: MsrFile(power_msr_path, c, writable=False))
    engine = Engine(MsrBackend(platform, clock), platform, clock, CPUS, 3600, power=power, native=native)
    try:
        engine.start()
        assert (engine._native is not None) == native
        for cpu in CPUS:
            write_msrs(root / f"dev/cpu/{cpu}/msr", FIRST)
        engine.set_interval(0.05)  # the first reading is 50 ms from now
        assert engine.wait_for_samples(dict.fromkeys(CPUS, 0), timeout=10)
    finally:
        engine.stop()
    return engine, [next(iter(engine.rings[cpu])) for cpu in CPUS]


def fields(sample: Sample) -> dict[str, Any]:
    return {name: getattr(sample, name) for name in POWER_FIELDS}


def test_the_native_threads_read_the_power_registers_and_the_fields_are_the_python_paths(tmp_path: Path) -> None:
    native_engine, native = first_interval(tmp_path / "native", native=True)
    assert native_engine._native is not None and native_engine._native._power == [True, True]
    assert native_engine.sampler_mode == "native threads"
    _, python = first_interval(tmp_path / "python", native=False)
    assert [fields(s) for s in native] == [fields(s) for s in python]
    first, second = native
    assert first.busy == 30.0 and first.cstates == {"C1": 30.0, "C3": 0.0, "C6": 40.0, "C7": 0.0}
    assert first.temp_c == 60.0 and first.throttle == ("thermal",)
    assert first.pkg_temp_c == 65.0
    assert first.energy_j == {"package": 0x2000 / 16384, "core": 1.0, "dram": 0.5}
    assert second.energy_j == {} and second.pkg_temp_c is None  # package values on the package's first CPU
    assert first.power_src == dict.fromkeys(
        ("busy", "bzy_mhz", "cstates", "temp_c", "throttle", "pkg_temp_c"), "msr"
    ) | {"energy_j": "msr"}
    for sample in native + python:  # TSC Hz x APERF / MPERF, with each run's own measured TSC rate
        assert sample.tsc_hz is not None
        assert sample.bzy_mhz == round(sample.tsc_hz / 1e6 * 900_000_000 / 600_000_000, 1)


def test_on_the_native_path_the_power_monitor_reads_no_register_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[int] = []
    read_msrs = PowerMonitor._read_msrs

    def counted(self: PowerMonitor, st: Any) -> tuple[list[int], int]:
        reads.append(1)
        return read_msrs(self, st)

    monkeypatch.setattr(PowerMonitor, "_read_msrs", counted)
    _, native = first_interval(tmp_path, native=True)
    assert not reads and native[0].busy == 30.0


def test_a_power_register_that_stops_answering_leaves_its_value_out_on_both_paths(tmp_path: Path) -> None:
    """RAPL's core (PP0) register goes missing mid-run (the file ends before it): from then on there is no
    core energy, the CPU goes on, as when the power monitor reads it itself."""
    out = {}
    for native in (True, False):
        root = tmp_path / str(native)
        build_sysroot(root, CPUS, SKYLAKE_X_LEAVES, msrs=idle_pmu_registers() | START)
        clock = MonotonicClock()
        platform = HostPlatform(Sysroot(root))
        power = PowerMonitor.for_platform(platform, CPUS)
        engine = Engine(MsrBackend(platform, clock), platform, clock, CPUS, 3600, power=power, native=native)
        try:
            engine.start()
            for cpu in CPUS:
                write_msrs(root / f"dev/cpu/{cpu}/msr", FIRST)
            os.truncate(root / "dev/cpu/0/msr", regs.MSR_PP0_ENERGY_STATUS * 8)
            engine.set_interval(0.05)
            assert engine.wait_for_samples(dict.fromkeys(CPUS, 1), timeout=10)
        finally:
            engine.stop()
        assert not engine.failures()
        out[native] = [fields(s) for s in list(engine.rings[0])[:2]]
    assert out[True] == out[False]
    first, second = out[True]
    assert first["energy_j"] == {"package": 0x2000 / 16384, "dram": 0.5}
    assert second["energy_j"] == {"package": 0.0, "dram": 0.0}


def test_a_power_monitor_on_another_file_reads_its_registers_itself(tmp_path: Path) -> None:
    """The native thread reads the power registers only from the msr file it reads the counters from."""
    other = tmp_path / "elsewhere" / "msr"
    write_msrs(other, START | {regs.IA32_TIME_STAMP_COUNTER: 0})
    engine, samples = first_interval(tmp_path / "root", native=True, power_msr_path=other)
    assert engine._native is not None and engine._native._power == [False, False]
    assert samples[0].busy is None and samples[0].temp_c == 55.0  # that file's registers, which did not move


def test_extra_registers_cannot_change_once_the_schedule_runs(tmp_path: Path) -> None:
    build_sysroot(tmp_path, CPUS, SKYLAKE_X_LEAVES, msrs=idle_pmu_registers() | START)
    clock = MonotonicClock()
    platform = HostPlatform(Sysroot(tmp_path))
    engine = Engine(
        MsrBackend(platform, clock), platform, clock, CPUS, 0.05, power=PowerMonitor.for_platform(platform, CPUS)
    )
    try:
        engine.start()
        assert engine._native is not None
        with pytest.raises(OSError, match="cannot set the extra registers of cpu 0"):
            engine._native.group.set_extra(0, [regs.IA32_APERF])
    finally:
        engine.stop()
