"""Frequency, idle states, temperature and energy beside the counters: register decoding, the simulated
machine, sysroot sources with missing registers, and the real cpuidle counters of this host."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from helpers.sysroot_builder import write_msrs

from pmutop.backends.sim import SimBackend
from pmutop.core.clock import ManualClock
from pmutop.core.sysroot import Sysroot
from pmutop.engine.engine import Engine
from pmutop.probes.power import regs
from pmutop.probes.power.monitor import PowerMonitor
from pmutop.probes.power.sysfs import CpuIdle
from pmutop.sim.model import SimConfig
from pmutop.sim.platform import SimPlatform


def test_rapl_units_wrap_and_tjmax_decode() -> None:
    assert regs.energy_unit_joules(0xA0E03) == 1 / 16384  # ESU 14: 61 µJ (SDM 14.9.1)
    assert regs.energy_unit_joules(0x1003) == 1 / 65536
    assert regs.energy_delta(0xFFFFFF00, 0x100) == 0x200  # one 32-bit wrap
    assert regs.energy_delta(5, 5) == 0
    assert regs.tjmax(0x00640000) == 100 and regs.tjmax(0x015A0000) == 90
    assert regs.tjmax(0) == regs.DEFAULT_TJMAX  # unprogrammed: turbostat's fallback
    assert regs.temperature_c(regs.THERM_READING_VALID | 37 << 16, 100) == 63.0
    assert regs.temperature_c(37 << 16, 100) is None  # reading not valid
    assert regs.throttle_flags(regs.THERM_STATUS_PROCHOT | regs.THERM_STATUS_POWER_LIMIT) == ["thermal", "power"]
    assert regs.busy_and_mhz(aperf=3_000, mperf=1_000, tsc=4_000, tsc_hz=2e9) == (0.25, 6000.0)


def _sim_run(intervals: int = 6, cpus: int = 4) -> tuple[list, SimPlatform]:
    clock = ManualClock(start_ns=1_000_000_000)
    platform = SimPlatform(SimConfig(cpus=cpus, seed=7), clock)
    power = PowerMonitor.for_platform(platform, platform.online_cpus())
    engine = Engine(
        SimBackend(platform, clock, None), platform, clock, platform.online_cpus(), 1.0, threaded=False, power=power
    )
    engine.start()
    out = []
    for _ in range(intervals):
        clock.advance(1.0)
        out.append(engine.tick())
    engine.stop()
    return out, platform


def test_simulated_power_follows_the_workload_and_survives_the_energy_wrap() -> None:
    ticks, platform = _sim_run()
    # The simulated counter starts 2^16 counts (4 J) below the wrap: it has wrapped by now.
    assert platform.machine.msr(0).read(regs.MSR_PKG_ENERGY_STATUS) < 1 << 20
    hot_pairs = 0
    for samples in ticks:
        first = samples[0]
        assert first.power_src["energy_j"] == "msr (SIMULATED)"
        assert 4.0 < first.energy_j["package"] < 60.0  # idle 4 W plus what the cores draw
        assert first.energy_j["core"] < first.energy_j["package"]
        assert all(not s.energy_j for s in samples[1:])  # package values once per package
        for s in samples:
            assert s.busy is not None and s.bzy_mhz is not None
            assert s.busy + sum(s.cstates.values()) == pytest.approx(100.0, abs=0.05)  # C0 + C1 + C6 = TSC
            assert abs(s.busy / 100 - s.counts["ref_cycles"] / s.tsc) < 0.01  # MPERF is the ref cycles
        busy = [s for s in samples if s.busy > 90]
        idle = [s for s in samples if s.busy < 5]
        for b in busy:
            for i in idle:
                hot_pairs += 1
                assert b.temp_c > i.temp_c
    assert hot_pairs  # the seed has busy and idle CPUs side by side
    watts = [t[0].energy_j["package"] for t in ticks]
    busy = [sum(s.busy for s in t) for t in ticks]
    assert watts[busy.index(max(busy))] > watts[busy.index(min(busy))]  # busier machine, more power


def _fake_sysroot(root: Path) -> None:
    cpu = root / "sys/devices/system/cpu"
    (cpu / "online").parent.mkdir(parents=True)
    (cpu / "online").write_text("0-1\n")
    for n in (0, 1):
        topo = cpu / f"cpu{n}/topology"
        topo.mkdir(parents=True)
        (topo / "physical_package_id").write_text("0\n")
        (topo / "core_id").write_text(f"{n}\n")
        for k, name in enumerate(("POLL", "C1", "C6")):
            d = cpu / f"cpu{n}/cpuidle/state{k}"
            d.mkdir(parents=True)
            (d / "name").write_text(name + "\n")
            (d / "time").write_text("1000\n")
    hw = root / "sys/class/hwmon/hwmon3"
    hw.mkdir(parents=True)
    (hw / "name").write_text("coretemp\n")
    for i, (label, mdeg) in enumerate((("Package id 0", 55000), ("Core 0", 51000), ("Core 1", 49000)), 1):
        (hw / f"temp{i}_label").write_text(label + "\n")
        (hw / f"temp{i}_input").write_text(f"{mdeg}\n")
    for zone, name, uj in (("intel-rapl:0", "package-0", 262_143_000_000), ("intel-rapl:0:0", "core", 100)):
        z = root / "sys/class/powercap" / zone
        z.mkdir(parents=True)
        (z / "name").write_text(name + "\n")
        (z / "energy_uj").write_text(f"{uj}\n")
        (z / "max_energy_range_uj").write_text("262143328850\n")


def test_sysroot_without_msr_uses_cpuidle_hwmon_and_powercap(tmp_path: Path) -> None:
    _fake_sysroot(tmp_path)
    sr = Sysroot(tmp_path)
    mon = PowerMonitor([0, 1], sysroot=sr, open_msr=None, msr_why="no msr device")
    assert [(s.name, s.available) for s in mon.sources()][:4] == [
        ("msr", False),
        ("cpuidle", True),
        ("hwmon", True),
        ("powercap", True),
    ]
    for c in (0, 1):
        mon.start(c)
    base = tmp_path / "sys/devices/system/cpu/cpu0/cpuidle"
    (base / "state1/time").write_text(f"{1000 + 250_000}\n")  # 0.25 s of a 1 s interval
    (base / "state2/time").write_text(f"{1000 + 500_000}\n")
    (tmp_path / "sys/class/powercap/intel-rapl:0/energy_uj").write_text("2000000\n")  # wrapped past the range
    (tmp_path / "sys/class/powercap/intel-rapl:0:0/energy_uj").write_text("1000100\n")
    s0 = mon.sample(0, 1.0, None)
    assert s0["cstates"] == {"POLL": 0.0, "C1": 25.0, "C6": 50.0}
    assert s0["temp_c"] == 51.0 and s0["pkg_temp_c"] == 55.0
    assert s0["energy_j"]["package"] == pytest.approx((262143328850 - 262_143_000_000 + 2_000_000) / 1e6)
    assert s0["energy_j"]["core"] == pytest.approx(1.0)
    assert s0["power_src"] == {"cstates": "cpuidle", "temp_c": "hwmon", "pkg_temp_c": "hwmon", "energy_j": "powercap"}
    assert "busy" not in s0  # nothing measured it: nothing shown
    assert "throttle" not in s0["power_src"]  # hwmon says nothing about throttling
    s1 = mon.sample(1, 1.0, None)
    assert s1["temp_c"] == 49.0 and "energy_j" not in s1 and "pkg_temp_c" not in s1


def test_msr_snapshot_with_missing_registers_reports_only_what_answers(tmp_path: Path) -> None:
    _fake_sysroot(tmp_path)
    msr = tmp_path / "dev/cpu/0/msr"
    base = {
        regs.IA32_TIME_STAMP_COUNTER: 0,
        regs.IA32_MPERF: 0,
        regs.IA32_APERF: 0,
        regs.IA32_THERM_STATUS: regs.THERM_READING_VALID | 30 << 16 | regs.THERM_STATUS_POWER_LIMIT,
        regs.MSR_TEMPERATURE_TARGET: 95 << 16,
        regs.MSR_CORE_C6_RESIDENCY: 0,
        regs.MSR_RAPL_POWER_UNIT: 0xA0E03,
        regs.MSR_PKG_ENERGY_STATUS: 0xFFFFF000,  # the highest address written: DRAM and PP0 lie beyond: missing
    }
    write_msrs(msr, base)
    sr = Sysroot(tmp_path)
    from pmutop.hw.msr import MsrFile

    mon = PowerMonitor([0], sysroot=sr, open_msr=lambda c: MsrFile(msr, c, writable=False))
    mon.start(0)
    write_msrs(
        msr,
        {
            regs.IA32_TIME_STAMP_COUNTER: 2_000_000_000,
            regs.IA32_MPERF: 500_000_000,
            regs.IA32_APERF: 750_000_000,
            regs.MSR_CORE_C6_RESIDENCY: 1_000_000_000,
            regs.MSR_PKG_ENERGY_STATUS: 0x1000,  # wrapped: 0x2000 counts
        },
    )
    s = mon.sample(0, 1.0, 2e9)
    mon.close()
    assert s["busy"] == 25.0 and s["bzy_mhz"] == 3000.0
    assert s["cstates"]["C6"] == 50.0 and s["cstates"]["C1"] == 25.0
    assert s["temp_c"] == 65.0 and s["throttle"] == ("power",)
    assert s["energy_j"] == {"package": pytest.approx(0x2000 / 16384)}  # core and dram: missing registers
    assert s["power_src"]["cstates"] == "msr"


def test_idle_residency_agrees_with_the_kernels_cpuidle_counters_on_this_host() -> None:
    sr = Sysroot("/")
    idle = CpuIdle(sr)
    cpus = [c for c in range(os.cpu_count() or 1) if idle.states(c)]
    if not cpus:
        pytest.skip("no cpuidle on this host")
    # The kernel adds an idle period to a state's `time` when the CPU leaves it: a CPU idle across the read
    # shows it later. Three windows: in one of them no CPU sits in a long idle period at a read.
    mismatches = []
    for _ in range(3):
        mismatches = _idle_mismatches(sr, idle, cpus)
        if not mismatches:
            break
    assert not mismatches


def _idle_mismatches(sr: Sysroot, idle: CpuIdle, cpus: list[int]) -> list[tuple[int, str, float, float]]:
    mon = PowerMonitor(cpus, sysroot=sr, open_msr=None)
    before = {c: idle.read(idle.states(c)) for c in cpus}
    t0 = time.monotonic()
    for c in cpus:
        mon.start(c)
    time.sleep(0.5)
    results = {c: mon.sample(c, time.monotonic() - t0, None) for c in cpus}
    after = {c: idle.read(idle.states(c)) for c in cpus}
    elapsed = time.monotonic() - t0
    out = []
    for c in cpus:
        got = results[c]["cstates"]
        assert results[c]["power_src"]["cstates"] == "cpuidle"
        assert set(got) == set(before[c])
        for name, pct in got.items():
            kernel = (after[c][name] - before[c][name]) / (elapsed * 1e4)
            if abs(pct - kernel) > 3.0:  # the reads are microseconds apart
                out.append((c, name, pct, kernel))
    return out


def test_live_view_model_keeps_power_history_and_the_columns_show_it() -> None:
    from pmutop.tui.columns import columns_for, render_cell
    from pmutop.tui.heatmap import BY_KEY
    from pmutop.tui.model import ViewModel

    clock = ManualClock(start_ns=1_000_000_000)
    platform = SimPlatform(SimConfig(cpus=2, seed=7), clock)
    power = PowerMonitor.for_platform(platform, [0, 1])
    engine = Engine(SimBackend(platform, clock, None), platform, clock, [0, 1], 1.0, threaded=False, power=power)
    engine.start()
    samples = []
    for _ in range(3):
        clock.advance(1.0)
        samples = engine.tick()
    model = ViewModel([0, 1])
    model.ingest(engine.rings)
    engine.stop()
    core0, core1 = model.cores[0], model.cores[1]
    assert len(core0.history["busy"]) == 3 and core0.history["busy"][-1] == samples[0].busy
    assert core0.history["pkg_watts"][-1] == pytest.approx(samples[0].energy_j["package"] / samples[0].interval)
    assert core1.history["pkg_watts"][-1] is None  # the package's energy is on its first CPU only
    assert model.total.history["temp_c"][-1] == max(s.temp_c for s in samples)
    keys = engine.keys(0)
    assert [c.key for c in columns_for(keys)][-1] == "task"
    assert not {"busy", "temp_c"} & {c.key for c in columns_for(keys)}  # nothing measured: no column
    cols = [c.key for c in columns_for(keys, power={"busy", "temp_c"})]
    assert cols[-1] == "task" and "busy" in cols and "temp_c" in cols and "pkg_watts" not in cols
    assert render_cell("busy", core0, model, 6).plain == f"{samples[0].busy:.0f}".rjust(6)
    assert render_cell("pkg_watts", core1, model, 6).plain.strip() == "-"
    assert {"busy", "bzy_mhz", "temp_c", "pkg_watts"} <= set(BY_KEY)


def test_amd_rapl_registers_are_read_with_their_own_unit(tmp_path: Path) -> None:
    from pmutop.hw.msr import MsrFile

    msr = tmp_path / "dev/cpu/0/msr"
    write_msrs(
        msr,
        {
            regs.IA32_APERF: 0,
            regs.MSR_AMD_RAPL_POWER_UNIT: 0x10 << 8,  # ESU 16: 15.3 µJ
            regs.MSR_AMD_CORE_ENERGY_STATUS: 100,
            regs.MSR_AMD_PKG_ENERGY_STATUS: 1000,
        },
    )
    mon = PowerMonitor([0], sysroot=None, open_msr=lambda c: MsrFile(msr, c, writable=False), amd=True)
    mon.start(0)
    write_msrs(msr, {regs.MSR_AMD_CORE_ENERGY_STATUS: 100 + 65536, regs.MSR_AMD_PKG_ENERGY_STATUS: 1000 + 3 * 65536})
    s = mon.sample(0, 1.0, None)
    mon.close()
    assert s["energy_j"] == {"package": 3.0, "core": 1.0}
    assert "pkg_temp_c" not in s  # AMD has no IA32_PACKAGE_THERM_STATUS: hwmon k10temp would say


def test_batch_json_carries_watts_on_the_packages_first_cpu_and_instructions_per_joule(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import json

    from pmutop.app.main import main

    code = main(["--demo", "--batch", "--count", "2", "--interval", "0.1", "--cores", "0-3", "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    recs = [r for line in out.splitlines() if (r := json.loads(line))["kind"] == "cpu"]  # not package (issue 22)
    for index in (1, 2):
        rs = [r for r in recs if r["interval_index"] == index]
        first, rest = rs[0], rs[1:]
        assert first["pkg_watts"] > 0 and all(r["pkg_watts"] is None for r in rest)
        joules = first["pkg_watts"] * first["interval"]
        assert first["instructions_per_joule"] == pytest.approx(sum(r["instructions"] for r in rs) / joules, rel=1e-3)
        for r in rs:
            assert 0 <= r["busy"] <= 1 and r["power_source"]["busy"] == "msr (SIMULATED)"
            assert set(r["cstates"]) == {"C1", "C6"} and r["throttle"] == []


class _FakeGroup:
    """A perf group over counters the test sets (what the kernel's msr/cstate_core/power PMUs would count)."""

    def __init__(self, cpu: int, events, counters: dict[str, int]) -> None:  # type: ignore[no-untyped-def]
        self.cpu, self.events, self.counters = cpu, list(events), counters
        self.closed = False

    def read(self):  # type: ignore[no-untyped-def]
        from pmutop.hw.perf_event import GroupReading

        return GroupReading(1, 1, [self.counters[e.name] for e in self.events])

    def close(self) -> None:
        self.closed = True


def _pmu(root: Path, name: str, type_: int, events: dict[str, str], scales: dict[str, str] | None = None) -> None:
    d = root / "sys/bus/event_source/devices" / name
    (d / "events").mkdir(parents=True)
    (d / "format").mkdir()
    (d / "type").write_text(f"{type_}\n")
    (d / "format/event").write_text("config:0-63\n")
    for ev, text in events.items():
        (d / "events" / ev).write_text(text + "\n")
    for ev, scale in (scales or {}).items():
        (d / "events" / f"{ev}.scale").write_text(scale + "\n")


def test_without_msr_access_the_kernels_perf_pmus_give_busy_cstates_and_energy(tmp_path: Path) -> None:
    from pmutop.probes.power.perf_power import PerfPower

    _fake_sysroot(tmp_path)
    _pmu(tmp_path, "msr", 9, {"tsc": "event=0x00", "aperf": "event=0x01", "mperf": "event=0x02"})
    _pmu(tmp_path, "cstate_core", 10, {"c6-residency": "event=0x02"})
    joule = "2.3283064365386962890625e-10"  # 2^-32 J, what arch/x86/events/rapl.c exports
    _pmu(tmp_path, "power", 11, {"energy-pkg": "event=0x02", "energy-ram": "event=0x03"}, {"energy-pkg": joule})
    counters = {"tsc": 0, "aperf": 0, "mperf": 0, "c6-residency": 0, "energy-pkg": 0, "energy-ram": 0}
    opened: list[_FakeGroup] = []

    def open_group(cpu: int, events):  # type: ignore[no-untyped-def]
        g = _FakeGroup(cpu, events, counters)
        opened.append(g)
        return g

    perf = PerfPower(Sysroot(tmp_path), open_group)
    assert [e.config for e in perf.pmus["msr"].events] == [1, 2, 0]  # aperf, mperf, tsc from the sysfs terms
    mon = PowerMonitor([0, 1], sysroot=Sysroot(tmp_path), open_msr=None, perf=perf)
    mon.start(0)
    mon.start(1)
    assert sorted((g.cpu, g.events[0].type) for g in opened) == [(0, 9), (0, 10), (0, 11), (1, 9), (1, 10)]
    counters.update({"tsc": 2 * 10**9, "aperf": 12 * 10**8, "mperf": 8 * 10**8, "c6-residency": 10**9})
    counters["energy-pkg"] = 5 << 32
    counters["energy-ram"] = 7  # no .scale file: already in the unit it says
    s = mon.sample(0, 1.0, None)
    assert s["busy"] == 40.0 and s["bzy_mhz"] == 3000.0  # TSC Hz from the tsc event over the interval
    assert s["cstates"] == {"C1": 10.0, "C6": 50.0}
    assert s["energy_j"] == {"package": 5.0, "dram": 7.0}
    assert s["power_src"]["busy"] == "perf:msr" and s["power_src"]["energy_j"] == "perf:power"
    assert s["power_src"]["cstates"] == "perf:cstate_core"  # before cpuidle in the order
    assert ("power", True, "events energy-pkg, energy-ram") in perf.status()
    mon.close()
    assert all(g.closed for g in opened)


def test_a_refused_perf_open_is_reported_and_the_sysfs_sources_take_over(tmp_path: Path) -> None:
    from pmutop.core.errors import HardwareError
    from pmutop.probes.power.perf_power import PerfPower

    _fake_sysroot(tmp_path)
    _pmu(tmp_path, "cstate_core", 10, {"c6-residency": "event=0x02"})

    def refuse(cpu: int, events):  # type: ignore[no-untyped-def]
        raise HardwareError(f"cpu {cpu}: permission denied (perf_event_paranoid 2)")

    mon = PowerMonitor([0], sysroot=Sysroot(tmp_path), open_msr=None, perf=PerfPower(Sysroot(tmp_path), refuse))
    mon.start(0)
    s = mon.sample(0, 1.0, None)
    assert s["power_src"]["cstates"] == "cpuidle"
    status = {x.name: x for x in mon.sources()}
    assert not status["perf:cstate_core"].available
    assert "permission denied" in status["perf:cstate_core"].detail


class _Registers:
    """An msr device over a dict; addresses in `failing` fault as a missing register does (EIO)."""

    def __init__(self, values: dict[int, int], failing: set[int]) -> None:
        self.values, self.failing = values, failing

    def read(self, address: int) -> int:
        from pmutop.hw.msr import MsrAccessError

        if address in self.failing or address not in self.values:
            raise MsrAccessError(0, address, "read", 5)
        return self.values[address]

    def read_many(self, addresses: tuple[int, ...]) -> list[int | None]:
        from pmutop.hw.msr import MsrDevice

        return MsrDevice.read_many(self, addresses)  # type: ignore[arg-type]

    def close(self) -> None:
        pass


def test_registers_read_elsewhere_give_the_fields_the_monitor_gives_reading_them_itself() -> None:
    """The native sampler threads read msr_registers(cpu) and hand the values to sample(): the same fields,
    a failed register (bit j) included, which leaves its delta out this interval and the next."""
    values = {
        regs.IA32_TIME_STAMP_COUNTER: 10,
        regs.IA32_APERF: 20,
        regs.IA32_MPERF: 30,
        regs.MSR_CORE_C6_RESIDENCY: 40,
        regs.IA32_THERM_STATUS: regs.THERM_READING_VALID | 30 << 16,
        regs.IA32_PACKAGE_THERM_STATUS: regs.THERM_READING_VALID | 20 << 16,
        regs.MSR_RAPL_POWER_UNIT: 0xA0E03,
        regs.MSR_PKG_ENERGY_STATUS: 100,
    }
    failing: set[int] = set()
    device = _Registers(values, failing)
    itself = PowerMonitor([0], sysroot=None, open_msr=lambda c: device)
    fed = PowerMonitor([0], sysroot=None, open_msr=lambda c: device)
    itself.start(0)
    fed.start(0)
    found = fed.msr_registers(0)
    assert found is not None and found[0] is device
    addresses = found[1]
    assert addresses[:4] == (regs.IA32_APERF, regs.IA32_MPERF, regs.IA32_TIME_STAMP_COUNTER, regs.MSR_CORE_C6_RESIDENCY)
    steps = [set(), {regs.IA32_MPERF, regs.MSR_PKG_ENERGY_STATUS}, set(), {regs.IA32_THERM_STATUS}, set()]
    for k, fails in enumerate(steps, 1):
        values.update({a: v + k * 1_000_000 * (i + 1) for i, (a, v) in enumerate(values.items()) if a < 0x100})
        values[regs.MSR_CORE_C6_RESIDENCY] += 500_000 * k
        values[regs.MSR_PKG_ENERGY_STATUS] += 16384 * k
        failing.clear()
        failing.update(fails)
        read = [0 if a in fails else values[a] for a in addresses]
        failed = sum(1 << j for j, a in enumerate(addresses) if a in fails)
        expected = itself.sample(0, 1.0, 2e9)
        assert fed.sample(0, 1.0, 2e9, (read, failed)) == expected
        assert ("busy" in expected) == (k not in (2, 3))  # MPERF missing: no delta then, nor the interval after
        assert ("temp_c" in expected) == (k != 4)
