"""Top-down on the msr backend: fixed counter 3 + PERF_METRICS programmed, read with the other counters (one
shim call on the rdpmc path), zeroed after every read, published as slots per category, and put back."""

from __future__ import annotations

import json

import pytest
from helpers.flags import needs_shim

from pmutop.backends.msr.backend import MsrBackend
from pmutop.backends.msr.counters import SLOTS_KEY, TOPDOWN_KEYS
from pmutop.backends.msr.restore import CpuRecord, restore_cpu
from pmutop.core.clock import ManualClock
from pmutop.core.sample import Sample
from pmutop.engine.engine import Engine
from pmutop.hw import shim
from pmutop.hw.platform import RDPMC_SYSFS
from pmutop.pmu import registers
from pmutop.pmu.events import EventSpec
from pmutop.pmu.registers import split_slots
from pmutop.sim.model import SimConfig
from pmutop.sim.platform import SimPlatform
from pmutop.sim.workload import TOPDOWN_FIELDS

NS = 1_000_000_000
L1 = TOPDOWN_KEYS[:4]
RDPMC_2 = {rel: "2" for rel in RDPMC_SYSFS}  # rdpmc allowed: the sampler reads with rdpmc


def make(clock: ManualClock, model: str = "spr", cpus: int = 2, *, settings: dict[str, str] | None = None, **kw):
    config = kw.pop("config", None) or SimConfig(model=model, cpus=cpus, seed=4)
    platform = SimPlatform(config, clock, settings)
    engine_cpus = kw.pop("engine_cpus", None) or platform.online_cpus()
    backend = MsrBackend(platform, clock, kw.pop("events", None), **kw)
    engine = Engine(backend, platform, clock, engine_cpus, 1.0, threaded=False)
    return platform, backend, engine


def log_writes(platform: SimPlatform, cpu: int) -> list[tuple[int, int]]:
    """Every WRMSR the backend makes on `cpu`, in order."""
    dev = platform.machine.msr(cpu)
    log: list[tuple[int, int]] = []
    raw = dev._write_raw

    def write(address: int, value: int) -> None:
        log.append((address, value))
        raw(address, value)

    dev._write_raw = write  # type: ignore[method-assign]
    return log


def fractions(s: Sample, n: int = 4) -> dict[str, float]:
    total = sum(s.counts[k] for k in L1)
    return {f: s.counts[k] / total for f, k in zip(TOPDOWN_FIELDS[:n], TOPDOWN_KEYS[:n], strict=True)}


def truth(platform: SimPlatform, cpu: int, a_ns: int, b_ns: int) -> dict[str, float]:
    return platform.machine.workload(cpu).topdown(a_ns, b_ns).fractions()


# -- programming ----------------------------------------------------------------------------------------------


def test_programs_fixed_counter_3_and_perf_metrics(clock: ManualClock) -> None:
    platform, backend, engine = make(clock)
    logs = {cpu: log_writes(platform, cpu) for cpu in (0, 1)}
    engine.start()
    for cpu in (0, 1):
        dev = platform.machine.msr(cpu)
        assert dev.read(registers.IA32_FIXED_CTR_CTRL) == 0x3333  # nibble 3: OS+USR, no AnyThread, no PMI
        glob = dev.read(registers.IA32_PERF_GLOBAL_CTRL)
        assert glob == 0xF_0000_000F | 1 << 48  # 4 GP (the default events), fixed 0-3, EN_PERF_METRICS
        assert glob >> 35 & 1 and glob >> 48 & 1
        log = logs[cpu]
        addresses = [a for a, _ in log]
        # Both zeroed while GLOBAL_CTRL is off, fixed counter 3 first, before counting is enabled.
        ctr3, metrics = addresses.index(registers.IA32_FIXED_CTR3), addresses.index(registers.MSR_PERF_METRICS)
        assert log[ctr3] == (registers.IA32_FIXED_CTR3, 0) and log[metrics] == (registers.MSR_PERF_METRICS, 0)
        assert addresses.index(registers.IA32_PERF_GLOBAL_CTRL) < ctr3 < metrics
        enable = len(addresses) - 1 - addresses[::-1].index(registers.IA32_PERF_GLOBAL_CTRL)
        assert metrics < enable and log[enable][1] & 1 << 48
        # After the baseline read both are zeroed again (the first interval starts there), in the same order.
        assert log[enable + 1 :] == [(registers.IA32_FIXED_CTR3, 0), (registers.MSR_PERF_METRICS, 0)]
        assert backend.counters(cpu).topdown_method == "perf_metrics"
        assert backend.topdown_method(cpu) == "perf_metrics"
        assert backend.counters(cpu).keys[-9:] == [SLOTS_KEY, *TOPDOWN_KEYS]
    # Every read: zero fixed counter 3 then PERF_METRICS, and nothing else (the default events do not rotate).
    for log in logs.values():
        log.clear()
    clock.advance(1.0)
    engine.tick()
    for log in logs.values():
        zeroing = [(a, v) for a, v in log if a != registers.IA32_PERF_GLOBAL_STATUS_RESET]
        assert zeroing == [(registers.IA32_FIXED_CTR3, 0), (registers.MSR_PERF_METRICS, 0)]
    assert engine.stop().failures == []


@pytest.mark.parametrize(
    ("model", "kw"), [("skx", {}), ("spr", {"topdown": False})], ids=["no-perf-metrics", "topdown-false"]
)
def test_no_top_down_where_there_is_no_perf_metrics_or_it_is_off(clock: ManualClock, model: str, kw: dict) -> None:
    platform, backend, engine = make(clock, model, **kw)
    log = log_writes(platform, 0)
    engine.start()
    dev = platform.machine.msr(0)
    assert dev.read(registers.IA32_FIXED_CTR_CTRL) == 0x333
    assert dev.read(registers.IA32_PERF_GLOBAL_CTRL) == 0x7_0000_000F
    assert not {registers.IA32_FIXED_CTR3, registers.MSR_PERF_METRICS} & {a for a, _ in log}
    clock.advance(1.0)
    (s, _) = engine.tick()
    assert s.topdown is None and backend.counters(0).topdown_method is None
    assert not {SLOTS_KEY, *TOPDOWN_KEYS} & set(s.counts)
    engine.stop()


def test_hybrid_measures_on_p_cores_only(clock: ManualClock) -> None:
    platform, _, engine = make(clock, "adl", cpus=4)
    engine.start()
    clock.advance(1.0)
    samples = {s.cpu: s for s in engine.tick()}
    for cpu in (0, 1):
        assert samples[cpu].topdown == "perf_metrics" and set(TOPDOWN_KEYS) <= set(samples[cpu].counts)
    for cpu in (2, 3):  # Gracemont: no PERF_METRICS, fixed counters 0-2 only
        assert samples[cpu].topdown is None and SLOTS_KEY not in samples[cpu].counts
        assert platform.machine.msr(cpu).read(registers.IA32_PERF_GLOBAL_CTRL) == 0x7_0000_000F
    engine.stop()


def test_hybrid_p_cores_whose_leaf_0xa_hides_fixed_counter_3(clock: ManualClock) -> None:
    """Alder Lake without CPUID 0x23: leaf 0xA may report the counters both core types share (6 GP, fixed 0-2);
    Linux adds fixed counter 3 on P-cores, and so does pmutop where PERF_CAPABILITIES[15] is set."""
    platform, backend, engine = make(clock, "adl", cpus=2)
    real = platform.cpuid

    def common_subset(cpu: int, leaf: int, subleaf: int = 0) -> tuple[int, int, int, int]:
        eax, ebx, ecx, edx = real(cpu, leaf, subleaf)
        if leaf == 0xA:  # 6 GP, fixed 0-2
            eax, ecx, edx = eax & ~0xFF00 | 6 << 8, 0x7, edx & ~0x1F | 3
        return eax, ebx, ecx, edx

    platform.cpuid = common_subset  # type: ignore[method-assign]
    engine.start()
    assert backend.counters(0).topdown_method == "perf_metrics"
    assert backend.counters(1).topdown_method is None  # the E-core
    clock.advance(1.0)
    s = next(x for x in engine.tick() if x.cpu == 0)
    t = platform.machine.elapsed_ns()
    assert s.counts[SLOTS_KEY] == platform.machine.workload(0).topdown(t - NS, t).slots
    assert engine.stop().failures == []


# -- arithmetic -----------------------------------------------------------------------------------------------


def test_split_slots_sums_to_slots_and_level_2_fits() -> None:
    metrics = 0x50_30_20_10 | 0x40_08_0F_20 << 32  # retiring 0x10 .. backend 0x50, then level 2
    parts = split_slots(1_000_003, metrics, 8)
    assert sum(parts[:4]) == 1_000_003
    total = 0x10 + 0x20 + 0x30 + 0x50
    for k, b in enumerate((0x10, 0x20, 0x30, 0x50)):
        assert abs(parts[k] - 1_000_003 * b / total) <= 1
    for k, b in enumerate((0x20, 0x0F, 0x08, 0x40)):
        assert parts[4 + k] == min(parts[k], round(1_000_003 * b / total))
    assert split_slots(0, metrics, 8) == [0] * 8 and split_slots(100, 0, 4) == [0] * 4
    assert split_slots(7, 0xFF, 4) == [7, 0, 0, 0]


@pytest.mark.parametrize(("model", "level2"), [("spr", True), ("icx", False)])
def test_each_interval_matches_the_workload_truth(clock: ManualClock, model: str, level2: bool) -> None:
    platform, _, engine = make(clock, model)
    engine.start()
    t0 = platform.machine.elapsed_ns()
    for _ in range(40):
        clock.advance(1.0)
        t1 = platform.machine.elapsed_ns()
        for s in engine.tick():
            td = platform.machine.workload(s.cpu).topdown(t0, t1)
            assert s.topdown == "perf_metrics" and s.suspect is None
            assert s.counts[SLOTS_KEY] == td.slots  # fixed counter 3, user + kernel: exact
            assert sum(s.counts[k] for k in L1) == s.counts[SLOTS_KEY]
            n = 8 if level2 else 4
            assert all(k in s.counts for k in TOPDOWN_KEYS[:n])
            assert level2 == any(k in s.counts for k in TOPDOWN_KEYS[4:])
            got, want = fractions(s, n), td.fractions()
            assert max(abs(got[f] - want[f]) for f in got) < 0.005  # 8-bit rounding of one interval only
        t0 = t1
    engine.stop()


def test_zeroing_every_interval_keeps_precision_where_a_running_total_drifts(clock: ManualClock) -> None:
    """The 8-bit fields describe every slot since the last zeroing: a reader that never zeroes and differences
    byte x slots between reads loses ~1/510 of the whole run's slots per interval (Linux topdown.txt: reset
    them regularly). The backend zeroes both after each read and stays within 0.02 of the truth."""
    platform, _, engine = make(clock, "spr", cpus=1)
    other = SimPlatform(SimConfig(model="spr", cpus=1, seed=4), clock)  # the same workload, read without zeroing
    dev = other.machine.msr(0)
    dev.write(registers.IA32_FIXED_CTR_CTRL, 0x3 << 12)
    dev.write(registers.IA32_PERF_GLOBAL_CTRL, registers.fixed_bit(3) | registers.GLOBAL_CTRL_EN_PERF_METRICS)
    engine.start()

    def cumulative_categories() -> list[float]:
        slots = dev.read(registers.IA32_FIXED_CTR3)
        b = [registers.perf_metrics_byte(dev.read(registers.MSR_PERF_METRICS), k) for k in range(4)]
        return [slots * x / sum(b) for x in b] if sum(b) else [0.0] * 4

    prev = cumulative_categories()
    t0 = platform.machine.elapsed_ns()
    zeroed_err, drift_err, steady = [], [], 0
    for _ in range(300):
        clock.advance(1.0)
        t1 = platform.machine.elapsed_ns()
        (s,) = engine.tick()
        want = truth(platform, 0, t0, t1)
        now = cumulative_categories()
        deltas = [b - a for a, b in zip(prev, now, strict=True)]
        drift = [d / sum(deltas) for d in deltas]
        got = fractions(s)
        if platform.machine.workload(0).rates_at(t0).phase == platform.machine.workload(0).rates_at(t1 - 1).phase:
            steady += 1
            zeroed_err.append(max(abs(got[f] - want[f]) for f in got))
            drift_err.append(max(abs(d - want[f]) for d, f in zip(drift, TOPDOWN_FIELDS, strict=False)))
        prev, t0 = now, t1
    assert steady > 200
    assert max(zeroed_err) < 0.02
    assert max(drift_err) > 0.02  # and growing with the run:
    assert max(drift_err[-50:]) > max(drift_err[:50])
    engine.stop()


def test_narrow_counters_fold_the_metrics_in_at_every_accumulate(clock: ManualClock) -> None:
    config = SimConfig(model="spr", cpus=1, seed=4, gp_width=32, fixed_width=32)
    platform, backend, engine = make(clock, config=config)
    log = log_writes(platform, 0)
    engine.start()
    period = engine.accumulate_period_ns
    assert period is not None
    t0 = platform.machine.elapsed_ns()
    for _ in range(3):
        log.clear()
        end = clock.now_ns() + 2 * NS  # a 2 s interval: about 11 wraps of a 32-bit slots counter in busy phases
        steps = 0
        while clock.now_ns() + period < end:
            clock.set_ns(clock.now_ns() + period)
            engine.accumulate()
            steps += 1
        clock.set_ns(end)
        (s,) = engine.tick()
        t1 = platform.machine.elapsed_ns()
        td = platform.machine.workload(0).topdown(t0, t1)
        assert s.suspect is None and s.counts[SLOTS_KEY] == td.slots > 1 << 32
        assert sum(s.counts[k] for k in L1) == td.slots
        got, want = fractions(s, 8), td.fractions()
        assert max(abs(got[f] - want[f]) for f in got) < 0.005
        assert [a for a, _ in log].count(registers.MSR_PERF_METRICS) == steps + 1  # zeroed at every collect
        assert SLOTS_KEY not in s.overflows
        t0 = t1
    assert backend.counters(0).accumulate_period_ns == period
    engine.stop()


def test_a_counter_3_wrap_and_the_metrics_overflow_bit_are_handled(clock: ManualClock) -> None:
    config = SimConfig(model="spr", cpus=1, seed=4, fixed_width=32)
    platform, _, engine = make(clock, config=config)
    engine.start()
    w = platform.machine.workload(0)
    t0 = platform.machine.elapsed_ns()
    dt = next(d for d in range(50, 5000, 10) if 1 << 32 < w.topdown(t0, t0 + d * 1_000_000).slots < 1 << 33)
    clock.set_ns(clock.now_ns() + dt * 1_000_000)  # no accumulate: one wrap within the read
    (s,) = engine.tick()
    td = w.topdown(t0, platform.machine.elapsed_ns())
    assert s.counts[SLOTS_KEY] == td.slots  # the wrap is added back
    assert s.overflows[SLOTS_KEY] == 1 and s.overflows["perf_metrics"] == 1
    assert platform.machine.msr(0).read(registers.IA32_PERF_GLOBAL_STATUS) == 0  # both bits cleared (W1C)
    clock.advance(0.01)
    (s,) = engine.tick()
    assert SLOTS_KEY not in s.overflows and "perf_metrics" not in s.overflows
    engine.stop()


# -- one read on the rdpmc path --------------------------------------------------------------------------------


def test_rdpmc_path_reads_slots_and_metrics_with_the_counters_in_one_call(clock: ManualClock) -> None:
    platform, backend, engine = make(clock, settings=RDPMC_2)
    calls: list[tuple] = []
    msr_reads: list[int] = []
    read_counters = platform.machine.read_counters

    def counted(cpu: int, n_fixed: int, n_gp: int, metrics: bool = False):  # type: ignore[no-untyped-def]
        calls.append((cpu, n_fixed, n_gp, metrics))
        return read_counters(cpu, n_fixed, n_gp, metrics)

    platform.machine.read_counters = counted  # type: ignore[method-assign]
    engine.start()
    assert backend.read_method == "rdpmc"
    dev = platform.machine.msr(0)
    raw_read = dev._read_raw
    dev._read_raw = lambda a: msr_reads.append(a) or raw_read(a)  # type: ignore[method-assign]
    calls.clear()
    clock.advance(1.0)
    (s, _) = engine.tick()
    assert [c for c in calls if c[0] == 0] == [(0, 4, 4, True)]  # fixed 0-3, GP 0-3, PERF_METRICS
    assert registers.IA32_FIXED_CTR3 not in msr_reads and registers.MSR_PERF_METRICS not in msr_reads
    assert s.counts[SLOTS_KEY] > 0
    engine.stop()


class FakeShimLib:
    """pmutop.hw._shim's lib over the simulator: what the C functions would store, and how often they ran."""

    def __init__(self, platform: SimPlatform, cpu: int) -> None:
        self.platform, self.cpu = platform, cpu
        self.calls: list[str] = []

    def pmutop_is_x86(self) -> int:
        return 1

    def _fill(self, n_fixed: int, n_gp: int, out, metrics: bool) -> int:  # type: ignore[no-untyped-def]
        tsc, values = self.platform.machine.read_counters(self.cpu, n_fixed, n_gp, metrics)
        for i, v in enumerate([tsc, *values]):
            out[i] = v
        return 0

    def pmutop_read_counters(self, n_fixed: int, n_gp: int, out) -> int:  # type: ignore[no-untyped-def]
        self.calls.append("read_counters")
        return self._fill(n_fixed, n_gp, out, False)

    def pmutop_read_counters_metrics(self, n_fixed: int, n_gp: int, out) -> int:  # type: ignore[no-untyped-def]
        self.calls.append("read_counters_metrics")
        return self._fill(n_fixed, n_gp, out, True)


@needs_shim
def test_shim_reader_takes_everything_in_one_c_call(clock: ManualClock, monkeypatch: pytest.MonkeyPatch) -> None:
    platform, backend, engine = make(clock, cpus=1)
    fake = FakeShimLib(platform, 0)
    monkeypatch.setattr(shim, "lib", fake)
    reader = shim.RdpmcReader(4, 2, metrics=True)
    _, values = reader.read()
    assert fake.calls == ["read_counters_metrics"] and len(values) == 4 + 2 + 1
    assert shim.RdpmcReader(3, 2).read()[1].__len__() == 5 and fake.calls[-1] == "read_counters"

    # The backend's sampler reads through that reader: one C call per read and per accumulate.
    monkeypatch.setattr(platform, "rdpmc_reader", lambda cpu, f, g, metrics=False: shim.RdpmcReader(f, g, metrics))
    monkeypatch.setattr(backend, "_choose_read_method", lambda cpus, undo: "rdpmc")
    engine.start()
    fake.calls.clear()
    clock.advance(1.0)
    (s,) = engine.tick()
    assert fake.calls == ["read_counters_metrics"]
    t = platform.machine.elapsed_ns()
    assert s.counts[SLOTS_KEY] == platform.machine.workload(0).topdown(t - NS, t).slots
    engine.stop()


# -- restore --------------------------------------------------------------------------------------------------

CONTROL = [registers.evtsel(i) for i in range(8)] + [registers.IA32_FIXED_CTR_CTRL, registers.IA32_PERF_GLOBAL_CTRL]
VALUES = [registers.fixed_ctr(i) for i in range(4)] + [registers.MSR_PERF_METRICS]


def leave_linux_idle_state(platform: SimPlatform, cpu: int) -> None:
    """What an idle PMU under Linux looks like on a PERF_METRICS part: GLOBAL_CTRL all enabled (bit 48 too),
    stale counter values, PERF_METRICS holding the fractions of the last topdown group."""
    m = platform.machine
    m.foreign_write(cpu, registers.IA32_PERF_GLOBAL_CTRL, 0xF_0000_00FF | 1 << 48)
    for i in range(4):
        m.foreign_write(cpu, registers.fixed_ctr(i), 0x1234_5678 + i)
    m.foreign_write(cpu, registers.MSR_PERF_METRICS, 0x0102_0304_4030_2A65)


def snapshot(platform: SimPlatform, cpu: int) -> dict[int, int]:
    dev = platform.machine.msr(cpu)
    return {a: dev.read(a) for a in CONTROL + VALUES}


def test_stop_restores_every_register_including_slots_and_perf_metrics(clock: ManualClock) -> None:
    platform, _, engine = make(clock)
    for cpu in (0, 1):
        leave_linux_idle_state(platform, cpu)
    before = {cpu: snapshot(platform, cpu) for cpu in (0, 1)}
    engine.start()
    clock.advance(1.0)
    engine.tick()
    assert snapshot(platform, 0) != before[0]
    assert engine.stop().failures == []
    for cpu in (0, 1):
        assert snapshot(platform, cpu) == before[cpu]


def test_a_crash_record_restores_them_too(clock: ManualClock) -> None:
    platform, backend, engine = make(clock)
    leave_linux_idle_state(platform, 0)
    before = snapshot(platform, 0)
    engine.start()
    clock.advance(1.0)
    engine.tick()
    # What the state file holds (written before the first register was), read back as a recovery would.
    stored = json.loads(json.dumps(backend.counters(0).record().to_json()))
    assert stored["saved_perf_metrics"] == 0x0102_0304_4030_2A65
    assert [f["index"] for f in stored["fixed"]] == [0, 1, 2, 3]
    # kill -9: no stop(); the next run (or `pmutop restore`) restores from the record.
    result = restore_cpu(platform.machine.msr(0), CpuRecord.from_json(stored))
    assert result.failures == [] and result.notes == []
    assert snapshot(platform, 0) == before


def test_records_of_runs_before_top_down_still_load(clock: ManualClock) -> None:
    _, backend, engine = make(clock, "skx")
    engine.start()
    stored = backend.counters(0).record().to_json()
    assert stored["saved_perf_metrics"] is None
    del stored["saved_perf_metrics"]  # a state file written by an older pmutop
    rec = CpuRecord.from_json(stored)
    assert rec.saved_perf_metrics is None and not rec.global_bits & 1 << 48
    engine.stop()


def test_counter_3_taken_over_leaves_perf_metrics_and_bit_48_alone(clock: ManualClock) -> None:
    platform, _, engine = make(clock, cpus=1)
    engine.start()
    clock.advance(1.0)
    engine.tick()
    m = platform.machine
    # perf takes fixed counter 3 (with PMI) and writes its own PERF_METRICS context.
    ctrl = m.msr(0).read(registers.IA32_FIXED_CTR_CTRL) & ~0xF000 | 0xB000
    m.foreign_write(0, registers.IA32_FIXED_CTR_CTRL, ctrl)
    m.foreign_write(0, registers.IA32_PERF_GLOBAL_CTRL, 0x8_0000_0000 | 1 << 48)
    m.foreign_write(0, registers.IA32_FIXED_CTR3, 777)
    m.foreign_write(0, registers.MSR_PERF_METRICS, 0x20_20_20_BF)
    result = engine.stop()
    assert result.failures == [] and any("IA32_FIXED_CTR3" in n for n in result.notes)
    dev = m.msr(0)
    assert dev.read(registers.IA32_PERF_GLOBAL_CTRL) & (1 << 48 | 1 << 35) == 1 << 48 | 1 << 35
    assert registers.fixed_ctrl_nibble(dev.read(registers.IA32_FIXED_CTR_CTRL), 3) == 0xB


# -- other methods through plain events ----------------------------------------------------------------------


def spec(name: str, event: int, umask: int, **kw: int) -> EventSpec:
    return EventSpec(name, registers.RawEvent(event, umask, **kw))


def test_formula_events_on_simulated_skx_give_the_truth(clock: ManualClock) -> None:
    # /work/shared/perfmon/SKX/events/skylakex_core.json encodings, as pmutop.pmu.builtin_events ships them.
    events = [
        spec("UOPS_ISSUED.ANY", 0x0E, 0x01),
        spec("UOPS_RETIRED.RETIRE_SLOTS", 0xC2, 0x02),
        spec("IDQ_UOPS_NOT_DELIVERED.CORE", 0x9C, 0x01),
        spec("INT_MISC.RECOVERY_CYCLES", 0x0D, 0x01),
    ]
    config = SimConfig(cpus=1, seed=6, mix="tma")
    platform, _, engine = make(clock, config=config, events=events)
    engine.start()
    t0 = platform.machine.elapsed_ns()
    for _ in range(20):
        clock.advance(1.0)
        (s,) = engine.tick()
        t1 = platform.machine.elapsed_ns()
        c = s.counts
        slots = 4 * c["cycles"]
        rec = c["int_misc_recovery_cycles"]
        got = {
            "retiring": c["uops_retired_retire_slots"] / slots,
            "bad_spec": (c["uops_issued_any"] - c["uops_retired_retire_slots"] + 4 * rec) / slots,
            "fe_bound": c["idq_uops_not_delivered_core"] / slots,
            "be_bound": 1 - (c["idq_uops_not_delivered_core"] + c["uops_issued_any"] + 4 * rec) / slots,
        }
        want = truth(platform, 0, t0, t1)
        assert max(abs(got[f] - want[f]) for f in got) < 1e-6
        assert s.topdown is None  # not PERF_METRICS: the planner that chose the events names the method
        t0 = t1
    engine.stop()


def test_gracemont_events_on_simulated_adl_e_cores_give_the_truth(clock: ManualClock) -> None:
    # /work/shared/perfmon/ADL/events/alderlake_gracemont_core.json encodings.
    events = [
        spec("TOPDOWN_FE_BOUND.ALL", 0x71, 0x00),
        spec("TOPDOWN_BAD_SPECULATION.ALL", 0x73, 0x00),
        spec("TOPDOWN_BE_BOUND.ALL", 0x74, 0x00),
        spec("TOPDOWN_RETIRING.ALL", 0xC2, 0x00),
    ]
    platform, _, engine = make(clock, "adl", cpus=2, events=events, engine_cpus=[1])  # the E-core
    engine.start()
    t0 = platform.machine.elapsed_ns()
    for _ in range(10):
        clock.advance(1.0)
        (s,) = engine.tick()
        t1 = platform.machine.elapsed_ns()
        c = s.counts
        slots = 5 * c["cycles"]
        got = {
            "retiring": c["topdown_retiring_all"] / slots,
            "bad_spec": c["topdown_bad_speculation_all"] / slots,
            "fe_bound": c["topdown_fe_bound_all"] / slots,
            "be_bound": c["topdown_be_bound_all"] / slots,
        }
        want = truth(platform, 1, t0, t1)
        assert max(abs(got[f] - want[f]) for f in got) < 1e-6
        t0 = t1
    engine.stop()
