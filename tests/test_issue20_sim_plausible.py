"""Issue 20: the simulated PMU stays plausible for the shape asked for (PMU version, CPU count)."""

from __future__ import annotations

import json

import pytest

from pmutop.app.main import main
from pmutop.core.clock import ManualClock
from pmutop.probes.power import regs
from pmutop.sim import power
from pmutop.sim.model import SimConfig, SimMachine

TMA_KEYS = ("tma_retiring", "tma_bad_speculation", "tma_frontend_bound", "tma_backend_bound")


def batch_records(capsys: pytest.CaptureFixture[str], *args: str) -> list[dict]:
    code = main(["--demo", "--batch", "--format", "json", *args])
    out, err = capsys.readouterr()
    assert code == 0, err
    return [r for line in out.splitlines() if (r := json.loads(line))["kind"] == "cpu"]  # not package (issue 22)


@pytest.mark.parametrize("version", ["2", "3", "4"])
def test_a_pmu_before_version_5_has_no_perf_metrics_top_down(capsys: pytest.CaptureFixture[str], version: str) -> None:
    # PERF_METRICS and fixed counter 3 (TOPDOWN.SLOTS) came with PMU version 5 (Ice Lake): a v2..v4 PMU of the
    # default model (spr, whose method is PERF_METRICS) measures no top-down at all.
    records = batch_records(capsys, "--sim-version", version, "--count", "1", "--interval", "0.05", "--cores", "0-1")
    assert records and all(r[k] is None for r in records for k in TMA_KEYS)
    assert all(r["ipc"] is not None for r in records)  # the rest is measured as before


def test_a_pmu_before_version_5_answers_cpuid_and_capabilities_as_such() -> None:
    m = SimMachine(SimConfig(model="spr", version=4), ManualClock())
    eax, _ebx, ecx, edx = m.cpuid(0, 0xA)
    assert edx & 0x1F == 3 and ecx == 0  # three fixed counters, no fixed-counter bitmap before v5
    assert eax >> 24 == 7  # no "topdown slots" architectural event
    assert not m.msr(0).read(0x345) & 1 << 15  # PERF_CAPABILITIES: no PERF_METRICS


def test_a_fourth_fixed_counter_before_version_5_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--demo", "--sim-version", "4", "--sim-fixed", "4", "--batch", "--count", "1"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.strip().count("\n") == 0 and "fixed" in err and "version 5" in err


def test_version_5_keeps_perf_metrics(capsys: pytest.CaptureFixture[str]) -> None:
    records = batch_records(capsys, "--sim-version", "5", "--count", "1", "--interval", "0.05", "--cores", "0")
    assert all(records[0][k] is not None for k in TMA_KEYS)


def _package_watts(model: str, cpus: int, seconds: float = 2.0) -> float:
    """Package power over `seconds` of a machine where every CPU runs (all advanced by a read)."""
    clock = ManualClock()
    machine = SimMachine(SimConfig(model=model, cpus=cpus), clock)
    dev = machine.msr(0)
    start = dev.read(regs.MSR_PKG_ENERGY_STATUS)
    clock.set_ns(int(seconds * 1e9))
    for cpu in machine.cpus:  # advance every CPU to now, as their samplers would
        machine.msr(cpu).read(regs.IA32_APERF)
        machine.states()[cpu].tsc()
    end = dev.read(regs.MSR_PKG_ENERGY_STATUS)
    return ((end - start) & 0xFFFFFFFF) * power.ENERGY_UNIT_J / seconds


@pytest.mark.parametrize("model", ["skx", "icx", "spr", "adl"])
def test_package_power_stays_within_the_models_power_limit(model: str) -> None:
    assert _package_watts(model, 256) <= power.PACKAGE_TDP_W[model]
    assert _package_watts(model, 256) > 0.3 * power.PACKAGE_TDP_W[model]  # a busy many-core part draws plenty


def test_the_issue_case_adl_256_cpus_in_batch(capsys: pytest.CaptureFixture[str]) -> None:
    records = batch_records(capsys, "--sim-model", "adl", "--sim-cpus", "256", "--count", "2", "--interval", "0.3")
    watts = [r["pkg_watts"] for r in records if r["pkg_watts"] is not None]
    assert watts and max(watts) <= power.PACKAGE_TDP_W["adl"]


def test_a_small_machine_draws_what_it_always_did() -> None:
    # 8 CPUs fit every model's limit: no scaling, so the demo's usual numbers stay as they were.
    assert power.dynamic_scale(SimConfig(model="adl", cpus=8)) == 1.0


def test_package_power_stays_within_the_tdp_when_samplers_lag() -> None:
    """The package counter sums what each CPU has run up to its own latest sample; a CPU whose sampler lags
    catches up at once. Read between two such catch-ups, the package must still not draw more than its TDP."""
    from pmutop.core.clock import ManualClock
    from pmutop.pmu import registers
    from pmutop.probes.power import regs
    from pmutop.sim.platform import SimPlatform

    clock = ManualClock(start_ns=1_000_000_000)
    platform = SimPlatform(SimConfig(model="adl", cpus=64, seed=3), clock)
    devices = {cpu: platform.machine.msr(cpu) for cpu in range(64)}
    unit_j = 1 / (1 << ((devices[0].read(regs.MSR_RAPL_POWER_UNIT) >> 8) & 0x1F))
    clock.advance(0.01)
    for cpu in range(64):
        devices[cpu].read(registers.IA32_PERF_GLOBAL_STATUS)  # every CPU sampled once: each its own sampler
    before = devices[0].read(regs.MSR_PKG_ENERGY_STATUS)
    clock.advance(1.0)
    devices[0].read(registers.IA32_PERF_GLOBAL_STATUS)
    first = devices[0].read(regs.MSR_PKG_ENERGY_STATUS)  # only cpu 0 sampled this second
    clock.advance(0.1)
    for cpu in range(64):
        devices[cpu].read(registers.IA32_PERF_GLOBAL_STATUS)  # the others catch up 1.1 s at once
    second = devices[0].read(regs.MSR_PKG_ENERGY_STATUS)
    for start, end, seconds in ((before, first, 1.0), (first, second, 0.1)):
        watts = ((end - start) & 0xFFFFFFFF) * unit_j / seconds
        assert watts <= power.PACKAGE_TDP_W["adl"] + 1e-6, watts
