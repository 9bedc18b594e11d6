"""Safety rules checked on the simulated PMU in-process: foreign counters, a sampler thread that cannot be
created, a watchdog that cannot be paused, the guardian restoring when the main thread is stuck."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from pmutop.backends.msr.backend import MsrBackend
from pmutop.core.clock import ManualClock
from pmutop.core.errors import HardwareError
from pmutop.engine.engine import Engine
from pmutop.hw.platform import NMI_WATCHDOG
from pmutop.pmu import registers
from pmutop.sim.model import SimConfig
from pmutop.sim.platform import SimPlatform


def make(  # type: ignore[no-untyped-def]
    clock: ManualClock, *, threaded: bool = False, cpus: int = 2, settings: dict[str, str] | None = None, **kw
):
    platform = SimPlatform(SimConfig(cpus=cpus, seed=3), clock, settings)
    backend = MsrBackend(platform, clock)
    engine = Engine(backend, platform, clock, platform.online_cpus(), 0.05, threaded=threaded, **kw)
    return platform, engine


def reg(platform: SimPlatform, cpu: int, address: int) -> int:
    return platform.machine.msr(cpu).read(address)


def test_a_counter_another_agent_starts_during_the_run_keeps_its_global_ctrl_bit(clock: ManualClock) -> None:
    platform, engine = make(clock)
    engine.start()
    # Another agent programs fixed counter 3's neighbour... a GP counter pmutop does not use (3),
    # and enables it in GLOBAL_CTRL.
    m = platform.machine
    m.foreign_write(0, registers.evtsel(3), 0x4300C0)
    m.foreign_write(
        0, registers.IA32_PERF_GLOBAL_CTRL, reg(platform, 0, registers.IA32_PERF_GLOBAL_CTRL) | registers.gp_bit(3)
    )
    clock.advance(1.0)
    engine.tick()
    result = engine.stop()
    assert result.failures == []
    glob = reg(platform, 0, registers.IA32_PERF_GLOBAL_CTRL)
    assert glob & registers.gp_bit(3), "pmutop switched the other agent's counter off"
    assert glob & ~registers.gp_bit(3) == 0  # our own bits are back to what they were (nothing enabled)
    assert reg(platform, 0, registers.evtsel(3)) == 0x4300C0
    assert reg(platform, 1, registers.IA32_PERF_GLOBAL_CTRL) == 0


def test_a_counter_another_agent_takes_over_keeps_its_bit_and_ours_go_back(clock: ManualClock) -> None:
    platform, engine = make(clock)
    engine.start()
    platform.machine.foreign_write(0, registers.evtsel(1), 0x4300C0)  # took our GP counter 1
    result = engine.stop()
    assert any("IA32_PERFEVTSEL1" in n and "left as found" in n for n in result.notes)
    assert reg(platform, 0, registers.evtsel(1)) == 0x4300C0
    assert reg(platform, 0, registers.IA32_PERF_GLOBAL_CTRL) == registers.gp_bit(
        1
    )  # only the taken counter stays enabled
    assert reg(platform, 0, registers.evtsel(0)) == 0 and reg(platform, 0, registers.IA32_FIXED_CTR_CTRL) == 0


def test_a_cpu_that_cannot_be_programmed_stops_the_start_and_restores_the_cpus_already_programmed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    platform, engine = make(ManualClock(1), threaded=True, cpus=4, native=False)
    real_pin = platform.pin_current_thread

    def pin(cpu: int) -> None:
        if cpu == 2:
            raise HardwareError("cannot pin a thread to cpu 2: Invalid argument")
        real_pin(cpu)

    monkeypatch.setattr(platform, "pin_current_thread", pin)
    with pytest.raises(HardwareError, match=r"cannot pin a thread to cpu 2"):
        engine.start()
    assert reg(platform, 0, registers.IA32_PERF_GLOBAL_CTRL) != 0  # the CPUs before it were programmed
    result = engine.stop()
    assert result.failures == []
    for cpu in range(4):
        assert reg(platform, cpu, registers.IA32_PERF_GLOBAL_CTRL) == 0, cpu
        assert reg(platform, cpu, registers.evtsel(0)) == 0, cpu


def test_a_sampler_thread_that_cannot_be_created_is_one_line_and_leaves_every_cpu_as_it_was(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    platform, engine = make(ManualClock(1), threaded=True, cpus=4)
    real_start = threading.Thread.start

    def start(self: threading.Thread) -> None:
        if self.name == "pmutop-samplers":
            raise RuntimeError("can't start new thread")
        real_start(self)

    monkeypatch.setattr(threading.Thread, "start", start)
    with pytest.raises(HardwareError, match=r"cannot start the sampler thread: .*ulimit -u"):
        engine.start()
    result = engine.stop()
    assert result.failures == []
    for cpu in range(4):
        assert reg(platform, cpu, registers.IA32_PERF_GLOBAL_CTRL) == 0, cpu
        assert reg(platform, cpu, registers.evtsel(0)) == 0, cpu


class ReadOnlyWatchdog(SimPlatform):
    def write_setting(self, rel: str, value: str) -> None:
        if rel == NMI_WATCHDOG:
            raise PermissionError(13, "Permission denied")
        super().write_setting(rel, value)


def test_a_watchdog_that_cannot_be_paused_is_one_error_and_nothing_else(clock: ManualClock) -> None:
    platform = ReadOnlyWatchdog(SimConfig(cpus=2, seed=3), clock, {NMI_WATCHDOG: "1"})
    engine = Engine(MsrBackend(platform, clock), platform, clock, [0, 1], 1.0, threaded=False)
    with pytest.raises(HardwareError, match=r"pausing it failed \(/proc/sys/kernel/nmi_watchdog: Permission denied\)"):
        engine.start()
    result = engine.stop()
    assert (result.failures, result.notes) == ([], [])  # no spurious "could not undo" warning
    assert platform.settings[NMI_WATCHDOG] == "1"
    assert reg(platform, 0, registers.evtsel(0)) == 0


@pytest.mark.integration
def test_the_guardian_restores_and_exits_when_the_main_thread_is_stuck(tmp_path: Path) -> None:
    """The UI hanging on a dead terminal: the restore does not wait for it."""
    marker = tmp_path / "restored"
    script = textwrap.dedent(
        f"""
        import threading, sys
        from pmutop.core.undo import RestoreResult
        from pmutop.safety.exit_guard import ExitGuard
        guard = ExitGuard(lambda m: print("pmutop: " + m, file=sys.stderr, flush=True))
        guard.install()
        def restore():
            open({str(marker)!r}, "w").write("yes")
            return RestoreResult()
        guard.set_restore(restore, lambda r: None)
        print("ready", flush=True)
        threading.Event().wait()  # stuck for ever, like Queue.put in a UI whose terminal is gone
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    t0 = time.monotonic()
    proc.terminate()
    _, err = proc.communicate(timeout=10)
    assert proc.returncode == 143
    assert err == "pmutop: stopped by SIGTERM\n"
    assert marker.read_text() == "yes"
    assert time.monotonic() - t0 < 5


def test_a_cpu_gone_offline_is_reported_not_restored_and_the_others_are(clock: ManualClock) -> None:
    import errno

    from pmutop.hw.msr import MsrAccessError

    platform, engine = make(clock, cpus=3)
    engine.start()
    dev = platform.machine.msr(1)

    def offline(address: int, *_: int) -> int:
        raise MsrAccessError(1, address, "access", errno.ENXIO)

    dev._read_raw = offline  # type: ignore[method-assign]
    dev._write_raw = offline  # type: ignore[method-assign]
    result = engine.stop()
    assert result.failed_cpus == {1}
    assert result.failures and all(f.startswith("cpu 1: ") for f in result.failures)
    for cpu in (0, 2):  # the undo went on past cpu 1's failures
        assert reg(platform, cpu, registers.IA32_PERF_GLOBAL_CTRL) == 0
        assert reg(platform, cpu, registers.evtsel(0)) == 0
