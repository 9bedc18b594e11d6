"""The native sampler threads (shim/pmutop_sampler.c, pmutop.engine.native_samplers) on msr sysroots of plain
files: what they publish, a failing CPU dropped alone, another agent's writes seen, the schedule followed,
the PMU put back, and the Python samplers where the shim has no native samplers."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.processes import wait_for_output
from helpers.sysroot_builder import SKYLAKE_X_LEAVES, build_sysroot, idle_pmu_registers, read_msr, write_msrs

from pmutop.backends.msr.backend import MsrBackend
from pmutop.backends.msr.counters import MsrCpuCounters
from pmutop.core.clock import MonotonicClock
from pmutop.core.errors import HardwareError
from pmutop.core.sysroot import Sysroot
from pmutop.engine.engine import Engine
from pmutop.hw import native_sampler
from pmutop.hw.platform import HostPlatform
from pmutop.pmu.events import parse_events

pytestmark = pytest.mark.skipif(not native_sampler.available(), reason="the shim has no native samplers")

INSTRUCTIONS = 0x309  # fixed counter 0
LLC_REFERENCES = 0xC1  # GP counter 0
EVTSEL0 = 0x186
STATUS = 0x38E


def make(root: Path, cpus: int = 3, interval: float = 0.1, **kw) -> Engine:  # type: ignore[no-untyped-def]
    build_sysroot(root, list(range(cpus)), SKYLAKE_X_LEAVES, msrs=idle_pmu_registers())
    clock = MonotonicClock()
    platform = HostPlatform(Sysroot(root))
    return Engine(MsrBackend(platform, clock), platform, clock, list(range(cpus)), interval, **kw)


def wait_until(condition, timeout: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_native_threads_publish_every_cpus_counts_each_interval(tmp_path: Path) -> None:
    engine = make(tmp_path)
    try:
        engine.start()
        assert engine._native is not None  # one native thread per CPU, one Python drain
        assert engine.wait_for_samples(dict.fromkeys(engine.cpus, 1), timeout=10)
        for cpu in engine.cpus:  # the counters move (GP counter 0 was zeroed through its full-width alias)
            llc = read_msr(tmp_path, cpu, LLC_REFERENCES) + 77
            write_msrs(tmp_path / f"dev/cpu/{cpu}/msr", {INSTRUCTIONS: 1000 * (cpu + 1), LLC_REFERENCES: llc})
        seen = {cpu: engine.rings[cpu].count for cpu in engine.cpus}
        assert engine.wait_for_samples(seen, timeout=10)
        for cpu in engine.cpus:
            samples = list(engine.rings[cpu])
            assert [s.seq for s in samples] == list(range(1, len(samples) + 1))
            assert sum(s.counts["instructions"] for s in samples) == 1000 * (cpu + 1)  # counted from 0
            assert sum(s.counts["llc_references"] for s in samples) == 77
            assert all(s.error is None and s.suspect is None and 0.05 < s.interval < 1.0 for s in samples[1:])
    finally:
        engine.stop()
    assert read_msr(tmp_path, 0, EVTSEL0) == 0  # put back


def test_a_cpu_whose_read_fails_is_dropped_and_the_others_go_on(tmp_path: Path) -> None:
    engine = make(tmp_path)
    try:
        engine.start()
        assert engine.wait_for_samples(dict.fromkeys(engine.cpus, 1), timeout=10)
        os.truncate(tmp_path / "dev/cpu/1/msr", STATUS * 8)  # cpu 1's GLOBAL_STATUS is gone
        wait_until(lambda: 1 in engine.failures())
        assert engine.failures() == {1: "cpu 1: read of IA32_PERF_GLOBAL_STATUS (0x38e) failed: no such register"}
        assert engine.rings[1].latest().error == engine.failures()[1]  # type: ignore[union-attr]
        counts = {cpu: engine.rings[cpu].count for cpu in (0, 2)}
        assert engine.wait_for_samples({cpu: n + 2 for cpu, n in counts.items()}, timeout=10)
    finally:
        engine.stop()


def test_another_agents_write_makes_the_samples_suspect(tmp_path: Path) -> None:
    engine = make(tmp_path, cpus=2)
    try:
        engine.start()
        assert engine.wait_for_samples(dict.fromkeys(engine.cpus, 1), timeout=10)
        write_msrs(tmp_path / "dev/cpu/1/msr", {EVTSEL0: 0x4300C0})
        wait_until(lambda: (s := engine.rings[1].latest()) is not None and s.suspect is not None, timeout=8)
        suspect = engine.rings[1].latest().suspect  # type: ignore[union-attr]
        assert suspect.startswith("PMU reprogrammed by another agent: IA32_PERFEVTSEL0")  # type: ignore[union-attr]
        assert all(s.suspect is None for s in engine.rings[0])
    finally:
        engine.stop()
    assert read_msr(tmp_path, 1, EVTSEL0) == 0x4300C0  # another agent's register is left as it set it


def test_a_new_interval_moves_the_native_schedule(tmp_path: Path) -> None:
    engine = make(tmp_path, cpus=2, interval=3600)
    try:
        engine.start()
        time.sleep(0.3)
        assert all(engine.rings[cpu].count == 0 for cpu in engine.cpus)  # the first deadline is an hour away
        engine.set_interval(0.05)
        assert engine.wait_for_samples(dict.fromkeys(engine.cpus, 2), timeout=10)
    finally:
        engine.stop()
    assert all(not t.is_alive() for t in engine._threads)


def test_without_the_native_samplers_the_python_samplers_do_the_same_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(native_sampler, "available", lambda: False)  # a shim built before them, or none
    engine = make(tmp_path, cpus=2)
    try:
        engine.start()
        assert engine._native is None and [t.name for t in engine._threads] == ["pmutop-samplers"]
        assert engine.wait_for_samples(dict.fromkeys(engine.cpus, 1), timeout=10)
    finally:
        engine.stop()
    assert read_msr(tmp_path, 0, EVTSEL0) == 0


# An Ice Lake-SP (family 6, model 0x6A) with PMU version 5, four fixed counters and PERF_METRICS
# (IA32_PERF_CAPABILITIES bit 15): top-down level 1 at no general counter's cost.
ICELAKE_X_LEAVES = {
    **SKYLAKE_X_LEAVES,
    (0x1, 0): (0x000606A6, 0x00200800, 0x7FFEFBBF, 0xBFEBFBFF),
    (0xA, 0): (0x07300405, 0x00000000, 0x0000000F, 0x00000604),
}


def test_the_default_msr_path_reads_with_native_threads(tmp_path: Path) -> None:
    engine = make(tmp_path, cpus=2)
    try:
        engine.start()
        assert engine.sampler_mode == "native threads"
    finally:
        engine.stop()


def test_top_down_through_perf_metrics_is_read_by_python_samplers_and_says_why(tmp_path: Path) -> None:
    """PERF_METRICS needs fixed counter 3 and PERF_METRICS zeroed right after every read (a write): the native
    threads never write, so one Python thread samples these CPUs, with the reason on the engine."""
    regs = {**idle_pmu_registers(fixed=4), 0x345: 0x33C5 | 0x8000, 0x329: 0}
    build_sysroot(tmp_path, [0, 1], ICELAKE_X_LEAVES, msrs=regs)
    clock = MonotonicClock()
    platform = HostPlatform(Sysroot(tmp_path))
    engine = Engine(MsrBackend(platform, clock), platform, clock, [0, 1], 0.05)
    try:
        engine.start()
        assert engine._native is None and [t.name for t in engine._threads] == ["pmutop-samplers"]
        assert engine.sampler_mode == (
            "one Python thread for every CPU: cpu 0: top-down through PERF_METRICS zeroes fixed counter 3 and "
            "PERF_METRICS after every read"
        )
        assert engine.wait_for_samples({0: 1, 1: 1}, timeout=10)
        sample = engine.rings[0].latest()
        assert sample is not None and sample.error is None and sample.topdown == "perf_metrics"
        assert {"slots", "topdown_retiring", "topdown_be_bound"} <= set(sample.counts)  # level 1 on Ice Lake
    finally:
        engine.stop()
    assert read_msr(tmp_path, 0, 0x38F) == regs[0x38F]  # GLOBAL_CTRL put back


def test_more_events_than_counters_are_read_by_python_samplers_and_say_why(tmp_path: Path) -> None:
    events = parse_events(["branches,branch-misses,llc-references,llc-misses,event=0xd1,umask=0x01"])
    build_sysroot(tmp_path, [0, 1], SKYLAKE_X_LEAVES, msrs=idle_pmu_registers())
    clock = MonotonicClock()
    platform = HostPlatform(Sysroot(tmp_path))
    engine = Engine(MsrBackend(platform, clock, events), platform, clock, [0, 1], 0.05)
    try:
        engine.start()
        assert engine.sampler_mode == (
            "one Python thread for every CPU: cpu 0: more events than counters: the event groups take turns, "
            "reprogrammed every interval"
        )
        assert engine.wait_for_samples({0: 2, 1: 2}, timeout=10)
        assert engine.rings[0].latest().estimated  # type: ignore[union-attr]
    finally:
        engine.stop()


def test_pmutop_samplers_python_in_the_environment_samples_with_the_python_drive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PMUTOP_SAMPLERS", "python")  # how the benchmarks compare the two in the live view
    engine = make(tmp_path, cpus=2)
    try:
        engine.start()
        assert (
            engine.sampler_mode == "one Python thread for every CPU: asked for (PMUTOP_SAMPLERS=python or native=False)"
        )
        assert engine._native is None and [t.name for t in engine._threads] == ["pmutop-samplers"]
        assert engine.wait_for_samples(dict.fromkeys(engine.cpus, 1), timeout=10)
    finally:
        engine.stop()


@pytest.mark.parametrize("native", [True, False], ids=["native samplers", "python samplers"])
def test_a_thread_that_cannot_be_pinned_is_one_line_on_both_paths(
    tmp_path: Path, native: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The Python drive moves onto a CPU only where its counters read there (rdpmc, as on a host with the shim).
    monkeypatch.setattr(MsrCpuCounters, "reads_on_own_cpu", property(lambda self: True))
    build_sysroot(tmp_path, [0, 1000], SKYLAKE_X_LEAVES, msrs=idle_pmu_registers())
    clock = MonotonicClock()
    platform = HostPlatform(Sysroot(tmp_path))
    platform.pins_threads = True  # as on a host; this host has no cpu 1000
    engine = Engine(MsrBackend(platform, clock), platform, clock, [0, 1000], 0.05, native=native)
    try:
        with pytest.raises(HardwareError) as failed:
            engine.start()
        assert (engine._native is not None) == native
        assert str(failed.value) == "cannot pin a thread to cpu 1000: Invalid argument"
    finally:
        result = engine.stop()
    assert not result.failures
    assert read_msr(tmp_path, 1000, EVTSEL0) == 0 and read_msr(tmp_path, 0, EVTSEL0) == 0


def test_the_python_drive_reads_msr_files_without_moving_onto_each_cpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An msr file reads from any CPU (the kernel interrupts the CPU for microseconds): the one Python thread does
    not move onto each CPU every interval, which would preempt what runs there."""
    build_sysroot(tmp_path, [0, 1], SKYLAKE_X_LEAVES, msrs=idle_pmu_registers())
    clock = MonotonicClock()
    platform = HostPlatform(Sysroot(tmp_path))
    platform.pins_threads = True  # as on a host
    moved: list[int] = []
    monkeypatch.setattr(platform, "pin_current_thread", moved.append)
    engine = Engine(MsrBackend(platform, clock), platform, clock, [0, 1], 0.05, native=False)
    try:
        engine.start()
        assert engine.wait_for_samples({0: 2, 1: 2}, timeout=10)
    finally:
        assert not engine.stop().failures
    assert moved == []


@pytest.mark.integration
def test_sigkill_with_native_threads_leaves_a_record_that_restore_puts_back(tmp_path: Path) -> None:
    """The native threads die with the process; what they read was programmed from Python, recorded in the
    state file first, so `pmutop restore` (or the next run) puts it back as on the Python path."""
    original = idle_pmu_registers() | {0x38F: 0x3_0000_0001}
    build_sysroot(tmp_path, [0, 1], SKYLAKE_X_LEAVES, msrs=original)
    argv = [sys.executable, "-m", "pmutop", "--sysroot", str(tmp_path), "--batch", "--interval", "0.05"]
    proc = subprocess.Popen([*argv, "--format", "json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert '"cpu":0' in wait_for_output(proc)
        tasks = Path(f"/proc/{proc.pid}/task")
        threads = {(tasks / tid / "comm").read_text().strip() for tid in os.listdir(tasks)}
        assert {"pmutop-cpu0", "pmutop-cpu1"} <= threads  # the native samplers did the reading
        assert read_msr(tmp_path, 0, EVTSEL0) != 0
    finally:
        proc.kill()
        proc.communicate(timeout=30)
    restore = [sys.executable, "-m", "pmutop", "restore", "--sysroot", str(tmp_path)]
    run = subprocess.run(restore, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert "restored: cpu 0-1 PMU registers" in run.stdout
    for cpu in (0, 1):
        for address in (EVTSEL0, 0x38D, 0x38F):
            assert read_msr(tmp_path, cpu, address) == original[address], (cpu, hex(address))
