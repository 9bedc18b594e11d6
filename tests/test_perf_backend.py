"""The perf backend on this real machine (software events), against `perf stat` over the same seconds."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers.flags import needs_perf, needs_perf_events
from helpers.workloads import PING_PONG

from pmutop.backends.perf import PerfBackend, encode_for_perf
from pmutop.core.errors import HardwareError, UsageError
from pmutop.core.sysroot import Sysroot
from pmutop.engine.engine import Engine
from pmutop.hw import perf_event
from pmutop.hw.platform import HostPlatform
from pmutop.pmu.events import ARCH_EVENTS, SOFTWARE_EVENTS, parse_events

pytestmark = pytest.mark.integration  # starts processes, terminals or servers


@pytest.fixture
def start_load() -> Iterator[Callable[[int, float], subprocess.Popen[str]]]:
    """Starts ping-pong loads; on teardown kills each one's whole process group (parent and forked child)."""
    procs: list[subprocess.Popen[str]] = []

    def start(cpu: int, seconds: float) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [sys.executable, "-c", PING_PONG, str(cpu), str(seconds)],
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its own process group, so teardown reaches the forked child too
        )
        procs.append(proc)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        return proc

    try:
        yield start
    finally:
        for proc in procs:
            stop_load(proc)


def stop_load(proc: subprocess.Popen[str]) -> None:
    # The load waits for its child before exiting, so once it is reaped the whole group is gone; only a
    # live one is killed (a reaped pid may belong to someone else by now).
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


@needs_perf_events
@needs_perf
def test_context_switch_rate_agrees_with_perf_stat(
    tmp_path: Path, start_load: Callable[[int, float], subprocess.Popen[str]]
) -> None:
    cpu = max(os.sched_getaffinity(0))
    load = start_load(cpu, 8.0)
    try:
        time.sleep(0.5)  # let the load settle into its steady rate
        perf = subprocess.Popen(
            ["perf", "stat", "-a", "-A", "-e", "context-switches", "-I", "500", "-x,", "--", "sleep", "4"],
            stderr=subprocess.PIPE,
            text=True,
        )
        ours = subprocess.run(
            [
                sys.executable,
                "-m",
                "pmutop",
                "--backend",
                "perf",
                "--events",
                "context-switches",
                "--batch",
                "--count",
                "8",
                "--interval",
                "0.5",
                "--format",
                "json",
                "--cores",
                str(cpu),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        _, perf_err = perf.communicate(timeout=60)
    finally:
        stop_load(load)
    assert ours.returncode == 0, ours.stderr
    records = [json.loads(line) for line in ours.stdout.splitlines()]
    assert len(records) == 8 and all(r["cpu"] == cpu and r["mode"] == "perf" for r in records)
    ours_rate = sum(r["context_switches"] for r in records) / sum(r["interval"] for r in records)
    rows = [line.split(",") for line in perf_err.splitlines() if f",CPU{cpu}," in line]
    assert rows, perf_err
    perf_rate = sum(int(r[2]) for r in rows) / float(rows[-1][0])
    assert perf_rate > 2000  # the ping-pong really ran on that CPU
    assert ours_rate == pytest.approx(perf_rate, rel=0.15)
    # The per-second rate in each record is the delta over its interval.
    for r in records:
        assert r["context_switches_per_s"] == pytest.approx(r["context_switches"] / r["interval"], rel=5e-6)


@needs_perf_events
def test_software_only_run_has_kernel_utilisation_and_no_invented_hardware_numbers(
    start_load: Callable[[int, float], subprocess.Popen[str]],
) -> None:
    platform = HostPlatform(Sysroot("/"))
    backend = PerfBackend(platform, platform.clock, software_only=True, hardware_problem="no PMU (test)")
    cpu = max(os.sched_getaffinity(0))
    engine = Engine(backend, platform, platform.clock, [cpu], 0.3)
    load = start_load(cpu, 3.0)
    try:
        engine.start()
        assert engine.wait_for_samples({cpu: 2}, timeout=10)
    finally:
        engine.stop()
        stop_load(load)
    s = engine.rings[cpu].latest()
    assert s is not None and s.error is None
    assert set(s.counts) == {"context_switches", "cpu_migrations", "page_faults"}
    assert s.counts["context_switches"] > 100
    assert s.util is not None and s.util > 0.3  # the ping-pong keeps that CPU busy
    assert "instructions" not in s.counts and not s.estimated
    assert any("IPC and cache columns are unavailable" in n for n in backend.notices)


def test_hardware_events_on_a_software_only_machine_are_refused() -> None:
    platform = HostPlatform(Sysroot("/"))
    backend = PerfBackend(
        platform,
        platform.clock,
        parse_events(["llc-misses"]),
        software_only=True,
        hardware_problem="the VM exposes no PMU",
    )
    engine = Engine(backend, platform, platform.clock, [0], 1.0)
    with pytest.raises(
        HardwareError,
        match=r"cannot count llc-misses: hardware events are unavailable here "
        r"\(the VM exposes no PMU\)",
    ):
        engine.start()
    engine.stop()


def test_perf_backend_refuses_a_sysroot(tmp_path: Path) -> None:
    platform = HostPlatform(Sysroot(tmp_path))
    engine = Engine(PerfBackend(platform, platform.clock), platform, platform.clock, [0], 1.0)
    with pytest.raises(UsageError, match="this host's CPUs"):
        engine.start()
    engine.stop()


def _pmu(name: str, type_: int) -> perf_event.PmuInfo:
    formats = {
        k: perf_event.parse_format(v)
        for k, v in {
            "event": "config:0-7",
            "umask": "config:8-15",
            "edge": "config:18",
            "inv": "config:23",
            "cmask": "config:24-31",
        }.items()
    }
    return perf_event.PmuInfo(name=name, type=type_, cpus=None, cpumask=None, formats=formats)


def test_encodings_for_perf() -> None:
    cpu_pmu = _pmu("cpu", 4)
    atom = _pmu("cpu_atom", 10)
    assert encode_for_perf(ARCH_EVENTS["llc-misses"], cpu_pmu, 0)[1:3] == (perf_event.PERF_TYPE_HARDWARE, 3)
    # hybrid: the generic event carries the PMU type in config[63:32]
    assert encode_for_perf(ARCH_EVENTS["cycles"], atom, 16)[1:3] == (perf_event.PERF_TYPE_HARDWARE, 10 << 32)
    assert encode_for_perf(SOFTWARE_EVENTS["context-switches"], None, 0)[1:3] == (perf_event.PERF_TYPE_SOFTWARE, 3)
    (raw,) = parse_events(["event=0xa3,umask=0x08,cmask=8,inv"])
    assert encode_for_perf(raw, atom, 16)[1:3] == (10, 0xA3 | 0x08 << 8 | 1 << 23 | 8 << 24)
    with pytest.raises(HardwareError, match="no core PMU"):
        encode_for_perf(raw, None, 0)


def test_groups_fit_the_counters_and_split_when_they_do_not(tmp_path: Path) -> None:
    """Skylake-X: 4 GP counters. Default events make one group; six raw events make a fixed-counter
    group plus GP groups of at most four, which the kernel multiplexes."""
    from helpers.sysroot_builder import SKYLAKE_X_LEAVES, build_sysroot

    build_sysroot(tmp_path, [0], SKYLAKE_X_LEAVES)
    platform = HostPlatform(Sysroot(tmp_path))
    pmus = {"cpu": _pmu("cpu", 4)}
    default = PerfBackend(platform, platform.clock)
    (group,) = default._group_specs(0, pmus)
    assert [e.name for e in group] == [
        "instructions",
        "cycles",
        "ref_cycles",
        "llc_references",
        "llc_misses",
        "branches",
        "branch_misses",
    ]
    raws = parse_events([f"event=0x{e:02x},umask=0x01" for e in (0xC4, 0xC5, 0xD1, 0xD2, 0xA3, 0x48)])
    many = PerfBackend(platform, platform.clock, raws)
    groups = many._group_specs(0, pmus)
    assert [len(g) for g in groups] == [3, 4, 2]
    assert [e.name for e in groups[0]] == ["instructions", "cycles", "ref_cycles"]
    assert all(e.type == 4 for g in groups[1:] for e in g)  # raw events on the core PMU's type
    assert any("6 events for 4 counters" in n for n in many.notices)
    (build_sysroot(tmp_path, [0], SKYLAKE_X_LEAVES, settings={"proc/sys/kernel/nmi_watchdog": "1"}))
    assert [len(g) for g in PerfBackend(platform, platform.clock, raws)._group_specs(0, pmus)] == [3, 3, 3]


@needs_perf_events
def test_ctrl_c_ends_a_perf_batch_run_while_it_waits_for_a_long_interval() -> None:
    # Batch mode with perf sleeps in the main thread until each deadline; a signal must end that sleep.
    def child_setup() -> None:  # a test runner may have SIGINT ignored; pmutop must see it as a user would
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    cmd = [sys.executable, "-m", "pmutop", "--backend", "perf", "--events", "context-switches", "--batch"]
    proc = subprocess.Popen(
        [*cmd, "--interval", "600", "--cores", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},  # the header as soon as it is printed
        preexec_fn=child_setup,
    )
    try:
        assert proc.stdout is not None
        assert "CPU" in proc.stdout.readline()  # counting: the header is out, the first deadline 10 min away
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert out == ""  # no interval was printed: it ended during the first wait
