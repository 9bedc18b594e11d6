"""The msr backend on a PMU v6 with 10 GP counters (Lunar Lake / Arrow Lake P-core): 10 programmable events
counted at once through the 0x1900 range, and every register put back."""

from __future__ import annotations

import json

import pytest

from pmutop.app.main import main
from pmutop.backends.msr.backend import MsrBackend
from pmutop.core.clock import ManualClock
from pmutop.engine.engine import Engine
from pmutop.pmu import registers
from pmutop.pmu.events import parse_events
from pmutop.sim.model import SimConfig
from pmutop.sim.platform import SimPlatform

V6 = registers.V6_REGISTERS
TEN = ",".join(f"event=0xc4,umask={u:#x}" for u in range(10))


def v6_registers(platform: SimPlatform, cpu: int, n_gp: int = 10) -> dict[int, int]:
    dev = platform.machine.msr(cpu)
    addresses = [V6.evtsel(i) for i in range(n_gp)] + [V6.pmc(i) for i in range(n_gp)]
    addresses += [V6.fixed_ctr(i) for i in range(3)]
    addresses += [registers.IA32_FIXED_CTR_CTRL, registers.IA32_PERF_GLOBAL_CTRL, registers.IA32_PERF_GLOBAL_STATUS]
    return {a: dev.read(a) for a in addresses}


@pytest.mark.parametrize("read", ["rdpmc", "msr"])
def test_ten_events_at_once_and_everything_restored(clock: ManualClock, read: str) -> None:
    platform = SimPlatform(SimConfig(cpus=2, version=6, gp_counters=10, seed=3), clock)
    m = platform.machine
    for cpu in (0, 1):  # counters holding old values above 2^31 (full-width writes bring them back)
        m.foreign_write(cpu, registers.IA32_PERF_GLOBAL_CTRL, registers.global_ctrl_mask(range(10), range(3)))
        for i in range(10):
            m.foreign_write(cpu, V6.pmc(i), 0x1234_5678_9A + i)
    before = {cpu: v6_registers(platform, cpu) for cpu in (0, 1)}
    backend = MsrBackend(platform, clock, parse_events([TEN]), read_method=read)
    engine = Engine(backend, platform, clock, [0, 1], 1.0, threaded=False)
    engine.start()
    plan = backend.counters(0).setup.plan
    assert not plan.rotating and sorted(p.index for p in plan.gp) == list(range(10))
    programmed = v6_registers(platform, 0)
    assert [programmed[V6.evtsel(i)] for i in range(10)] == [0x4300C4 | u << 8 for u in range(10)]
    assert programmed[registers.IA32_PERF_GLOBAL_CTRL] == registers.global_ctrl_mask(range(10), range(3))
    clock.advance(1.0)
    samples = engine.tick()
    assert len(samples) == 2
    for sample in samples:
        assert sample.suspect is None and not sample.estimated
        assert all(sample.counts[f"r{u:02x}c4"] > 0 for u in range(10)), sample.counts
    assert engine.stop().failures == []
    for cpu in (0, 1):
        assert v6_registers(platform, cpu) == before[cpu]


def test_cli_ten_events_on_a_v6_sim(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--demo", "--sim-version", "6", "--sim-gp", "10", "--batch", "--count", "1", "--interval", "0.05"]
    code = main([*args, "--cores", "0", "--format", "json", "--records", "cpu", "--events", TEN])
    out, err = capsys.readouterr()
    assert code == 0, err
    rec = json.loads(out)
    assert all(rec[f"r{u:02x}c4"] > 0 for u in range(10)), rec
    assert "estimated" not in rec or not rec["estimated"], rec


def test_cli_sim_gp_beyond_8_needs_version_6(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--demo", "--sim-gp", "10", "--batch", "--count", "1"]) == 2
    assert "--sim-gp 10 needs --sim-version 6" in capsys.readouterr().err


def test_another_agent_on_an_e_core_fixed_counter_5_is_seen() -> None:
    """Skymont-like E-cores have fixed counters 4-6 (bitmap 0x77): their FIXED_CTR_CTRL fields count too."""
    from test_v6_registers import _cpuid

    from pmutop.pmu.usage import find_foreign_use

    pm = _cpuid(6, 8, 0x77, True)
    regs = {pm.registers.evtsel(i): 0 for i in pm.gp_indexes} | {registers.IA32_FIXED_CTR_CTRL: 0x3 << (4 * 5)}
    assert find_foreign_use(pm, regs, tolerate_watchdog=False) == [
        (registers.IA32_FIXED_CTR_CTRL, "0x300000: fixed counter 5 enabled")
    ]
