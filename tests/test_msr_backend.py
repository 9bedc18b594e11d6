"""The msr backend's programming, reading and restoring, run against the register-level simulated PMU."""

from __future__ import annotations

import pytest

from pmutop.backends.msr.backend import MsrBackend
from pmutop.core.clock import ManualClock
from pmutop.core.errors import ForbiddenMsrWrite, HardwareError, PmuInUseError, UsageError
from pmutop.engine.engine import Engine
from pmutop.hw.platform import NMI_WATCHDOG, RDPMC_SYSFS
from pmutop.pmu import registers
from pmutop.pmu.events import parse_events
from pmutop.sim.model import SimConfig
from pmutop.sim.platform import SimPlatform

CONTROL = [registers.evtsel(i) for i in range(4)] + [registers.IA32_FIXED_CTR_CTRL, registers.IA32_PERF_GLOBAL_CTRL]


def make(clock: ManualClock, config: SimConfig | None = None, settings: dict[str, str] | None = None, **kw):
    platform = SimPlatform(config or SimConfig(cpus=2, seed=3), clock, settings)
    backend = MsrBackend(platform, clock, kw.pop("events", None), **kw)
    engine = Engine(backend, platform, clock, platform.online_cpus(), 1.0, threaded=False)
    return platform, backend, engine


def regs(platform: SimPlatform, cpu: int, addresses: list[int]) -> dict[int, int]:
    dev = platform.machine.msr(cpu)
    return {a: dev.read(a) for a in addresses}


def test_programs_the_documented_register_values(clock: ManualClock) -> None:
    platform, _, engine = make(clock)
    engine.start()
    for cpu in (0, 1):
        r = regs(platform, cpu, CONTROL)
        # USR|OS|EN (0x43 << 16) with LLC references, LLC misses, branches, branch misses; never INT or AnyThread
        assert r[registers.evtsel(0)] == 0x434F2E
        assert r[registers.evtsel(1)] == 0x43412E
        assert r[registers.evtsel(2)] == 0x4300C4
        assert r[registers.evtsel(3)] == 0x4300C5
        assert r[registers.IA32_FIXED_CTR_CTRL] == 0x333
        assert r[registers.IA32_PERF_GLOBAL_CTRL] == 0x7_0000_000F
    engine.stop()


@pytest.mark.parametrize(
    ("flags", "evtsel0", "fixed_ctrl"),
    [({"user": True, "kernel": False}, 0x414F2E, 0x222), ({"user": False, "kernel": True}, 0x424F2E, 0x111)],
)
def test_user_or_kernel_only(clock: ManualClock, flags: dict[str, bool], evtsel0: int, fixed_ctrl: int) -> None:
    platform, _, engine = make(clock, **flags)
    engine.start()
    r = regs(platform, 0, CONTROL)
    assert r[registers.evtsel(0)] == evtsel0
    assert r[registers.IA32_FIXED_CTR_CTRL] == fixed_ctrl
    engine.stop()


def test_restores_every_register_it_wrote(clock: ManualClock) -> None:
    platform = SimPlatform(SimConfig(cpus=2, seed=3), clock)
    m = platform.machine
    # A PMU left as Linux leaves it when idle: GLOBAL_CTRL all enabled, counters holding old values.
    for cpu in (0, 1):
        m.foreign_write(cpu, registers.IA32_PERF_GLOBAL_CTRL, 0x7_0000_000F)
        for i in range(4):
            m.foreign_write(cpu, registers.a_pmc(i), 0x1234_5678_9A + i)
    before = {cpu: regs(platform, cpu, CONTROL) for cpu in (0, 1)}
    before_pmc = {cpu: regs(platform, cpu, [registers.pmc(i) for i in range(4)]) for cpu in (0, 1)}
    backend = MsrBackend(platform, clock)
    engine = Engine(backend, platform, clock, [0, 1], 1.0, threaded=False)
    engine.start()
    clock.advance(1.0)
    engine.tick()
    assert regs(platform, 0, CONTROL) != before[0]
    assert engine.stop().failures == []
    for cpu in (0, 1):
        assert regs(platform, cpu, CONTROL) == before[cpu]
        # Counter values need full-width writes (PERF_CAPABILITIES[13]) to come back above 2^31.
        assert regs(platform, cpu, [registers.pmc(i) for i in range(4)]) == before_pmc[cpu]


def test_refuses_a_pmu_in_use_and_writes_nothing(clock: ManualClock) -> None:
    platform = SimPlatform(SimConfig(cpus=2, seed=3), clock)
    platform.machine.foreign_write(1, registers.evtsel(2), 0x5300C4)  # perf counting branches with PMI
    platform.machine.foreign_write(1, registers.IA32_PERF_GLOBAL_CTRL, 0x4)
    snapshot = {cpu: platform.machine.msr(cpu).snapshot() for cpu in (0, 1)}
    engine = Engine(MsrBackend(platform, clock), platform, clock, [0, 1], 1.0, threaded=False)
    with pytest.raises(PmuInUseError) as info:
        engine.start()
    msg = str(info.value)
    assert "cpu 1" in msg and "IA32_PERFEVTSEL2" in msg and "in use" in msg and "\n" not in msg
    assert info.value.exit_code == 3
    engine.stop()
    assert {cpu: platform.machine.msr(cpu).snapshot() for cpu in (0, 1)} == snapshot


def test_leftover_perf_config_counts_as_in_use_and_force_takes_over(clock: ManualClock) -> None:
    platform = SimPlatform(SimConfig(cpus=1, seed=3), clock)
    platform.machine.foreign_write(0, registers.evtsel(0), 0x13003C)  # disabled but programmed (perf leaves INT set)
    backend = MsrBackend(platform, clock, force=True)
    engine = Engine(backend, platform, clock, [0], 1.0, threaded=False)
    engine.start()
    assert any("--force" in n and "IA32_PERFEVTSEL0" in n for n in backend.notices)
    assert regs(platform, 0, [registers.evtsel(0)])[registers.evtsel(0)] == 0x434F2E
    engine.stop()
    assert regs(platform, 0, [registers.evtsel(0)])[registers.evtsel(0)] == 0x13003C


def test_fixed_counter_pmi_without_watchdog_is_in_use(clock: ManualClock) -> None:
    platform = SimPlatform(SimConfig(cpus=1, seed=3), clock)
    platform.machine.foreign_write(0, registers.IA32_FIXED_CTR_CTRL, 0xB0)
    engine = Engine(MsrBackend(platform, clock), platform, clock, [0], 1.0, threaded=False)
    with pytest.raises(PmuInUseError, match="cpu 0: IA32_FIXED_CTR_CTRL is in use"):
        engine.start()
    engine.stop()


def test_pauses_the_nmi_watchdog_and_restores_it_after_the_registers(clock: ManualClock) -> None:
    platform, backend, engine = make(clock, settings={NMI_WATCHDOG: "1"})
    assert (
        regs(platform, 0, [registers.IA32_FIXED_CTR_CTRL])[registers.IA32_FIXED_CTR_CTRL] == 0xB0
    )  # the watchdog's counter
    engine.start()
    assert platform.settings[NMI_WATCHDOG] == "0"
    assert any("NMI watchdog paused" in n for n in backend.notices)
    assert regs(platform, 0, [registers.IA32_FIXED_CTR_CTRL])[registers.IA32_FIXED_CTR_CTRL] == 0x333
    assert engine.stop().failures == []
    assert platform.settings[NMI_WATCHDOG] == "1"
    # The watchdog re-armed its counter after pmutop had put its own registers back.
    r = regs(platform, 0, [registers.IA32_FIXED_CTR_CTRL, registers.IA32_PERF_GLOBAL_CTRL, registers.evtsel(0)])
    assert r[registers.IA32_FIXED_CTR_CTRL] == 0xB0
    assert r[registers.IA32_PERF_GLOBAL_CTRL] & registers.fixed_bit(1)
    assert r[registers.evtsel(0)] == 0


def test_keep_nmi_watchdog_refuses(clock: ManualClock) -> None:
    platform, _, engine = make(clock, settings={NMI_WATCHDOG: "1"}, keep_nmi_watchdog=True)
    with pytest.raises(PmuInUseError, match="NMI watchdog"):
        engine.start()
    engine.stop()
    assert platform.settings[NMI_WATCHDOG] == "1"
    assert regs(platform, 0, [registers.evtsel(0)])[registers.evtsel(0)] == 0


def test_counts_match_an_unwrapped_run_across_narrow_counter_wraps(clock: ManualClock) -> None:
    """34-bit counters wrap every few seconds at 4 GHz; deltas modulo 2^34 plus overflow bits must
    give the same counts as 48-bit counters, and each wrap is counted once."""
    wide_clock = ManualClock(start_ns=clock.now_ns())
    narrow_cfg = SimConfig(cpus=1, seed=5, gp_width=34, fixed_width=34)
    _, _, narrow = make(clock, narrow_cfg)
    _, _, wide = make(wide_clock, SimConfig(cpus=1, seed=5))
    narrow.start()
    wide.start()
    overflows: dict[str, int] = {}
    totals: dict[str, int] = {}
    for _ in range(60):
        clock.advance(0.2)
        wide_clock.advance(0.2)
        (n,) = narrow.tick()
        (w,) = wide.tick()
        assert n.counts == w.counts
        assert n.suspect is None, n.suspect
        for k, v in n.overflows.items():
            overflows[k] = overflows.get(k, 0) + v
        for k, v in w.counts.items():
            totals[k] = totals.get(k, 0) + v
    for key in ("cycles", "instructions", "ref_cycles"):
        wraps = totals[key] >> 34  # counters start from 0 after programming
        assert wraps >= 1
        assert overflows.get(key, 0) == wraps, key
    narrow.stop()
    wide.stop()


def test_overflow_bits_are_cleared_write_1_to_clear(clock: ManualClock) -> None:
    platform, _, engine = make(clock, SimConfig(cpus=1, seed=5, fixed_width=34))
    engine.start()
    for _ in range(40):  # 8 s: the 34-bit instruction counter wraps a few times
        clock.advance(0.2)
        engine.tick()
    samples = list(engine.rings[0])
    flagged = [s for s in samples if s.overflows.get("instructions")]
    wraps = sum(s.counts["instructions"] for s in samples) >> 34
    assert wraps >= 1
    assert len(flagged) == wraps  # a bit left set (writing 0 to 0x390 clears nothing) would show every tick
    assert platform.machine.msr(0).read(registers.IA32_PERF_GLOBAL_STATUS) & registers.fixed_bit(0) == 0
    engine.stop()


def test_interval_longer_than_the_wrap_time_is_suspect(clock: ManualClock) -> None:
    _, _, engine = make(clock, SimConfig(cpus=1, seed=5, gp_width=32, fixed_width=32))
    engine.start()
    clock.advance(0.5)  # 2^32 events can pass in 86 ms
    (s,) = engine.tick()
    assert s.suspect is not None and "shortest wrap time" in s.suspect
    clock.advance(0.05)
    (s,) = engine.tick()
    assert s.suspect is None
    engine.stop()


def test_stale_frozen_bit_is_cleared_and_the_sample_marked(clock: ManualClock) -> None:
    platform, _, engine = make(clock, SimConfig(cpus=1, seed=5))
    engine.start()
    clock.advance(1.0)
    engine.tick()
    platform.machine.set_status_bits(0, registers.STATUS_CTR_FRZ)
    clock.advance(1.0)
    (frozen,) = engine.tick()
    assert frozen.suspect is not None and "frozen" in frozen.suspect
    assert frozen.counts["cycles"] == 0
    assert platform.machine.msr(0).read(registers.IA32_PERF_GLOBAL_STATUS) & registers.STATUS_CTR_FRZ == 0
    clock.advance(1.0)
    (after,) = engine.tick()
    assert after.suspect is None
    assert after.counts["cycles"] > 0
    engine.stop()


def test_reprogramming_by_another_agent_marks_samples_and_is_left_alone(clock: ManualClock) -> None:
    platform, _, engine = make(clock)
    engine.start()
    clock.advance(1.0)
    assert all(s.suspect is None for s in engine.tick())
    platform.machine.foreign_write(1, registers.evtsel(1), 0x4300C0)
    clock.advance(1.0)
    s0, s1 = engine.tick()
    assert s0.suspect is None
    assert s1.suspect is not None and "IA32_PERFEVTSEL1" in s1.suspect and "0x43412e -> 0x4300c0" in s1.suspect
    result = engine.stop()
    assert result.failures == []
    assert any("cpu 1" in p and "IA32_PERFEVTSEL1" in p and "left as found" in p for p in result.notes)
    assert (
        regs(platform, 1, [registers.evtsel(1)])[registers.evtsel(1)] == 0x4300C0
    )  # the other agent keeps its register
    assert regs(platform, 0, [registers.evtsel(1)])[registers.evtsel(1)] == 0


def test_counter_reset_without_overflow_is_suspect(clock: ManualClock) -> None:
    platform, _, engine = make(clock, SimConfig(cpus=1, seed=5))
    engine.start()
    clock.advance(1.0)
    engine.tick()
    platform.machine.foreign_write(0, registers.pmc(1), 0)  # e.g. the kernel clearing a "dirty" counter
    clock.advance(0.01)
    (s,) = engine.tick()
    assert s.suspect is not None and "llc_misses" in s.suspect and "backwards" in s.suspect
    engine.stop()


def test_fewer_counters_shrink_the_default_events_llc_first(clock: ManualClock) -> None:
    platform, backend, engine = make(clock, SimConfig(cpus=1, gp_counters=2, seed=3))
    engine.start()
    assert backend.counters(0).keys == ["instructions", "cycles", "ref_cycles", "llc_references", "llc_misses"]
    assert any("not counting branches" in n for n in backend.notices)
    assert regs(platform, 0, [registers.IA32_PERF_GLOBAL_CTRL])[registers.IA32_PERF_GLOBAL_CTRL] == 0x7_0000_0003
    engine.stop()


def test_more_events_than_counters_rotate_groups_across_intervals(clock: ManualClock) -> None:
    """Two GP counters, three events: groups {llc-misses, branches} and {branch-misses} take turns.
    A counted event's value is exact; a resting one is its last rate times the interval."""
    events = parse_events(["llc-misses,branches,branch-misses"])
    truth_clock = ManualClock(start_ns=clock.now_ns())
    platform, backend, engine = make(clock, SimConfig(cpus=1, gp_counters=2, seed=3), events=events)
    _, _, truth = make(truth_clock, SimConfig(cpus=1, gp_counters=4, seed=3), events=events)
    engine.start()
    truth.start()
    assert backend.counters(0).keys == [
        "instructions",
        "cycles",
        "ref_cycles",
        "llc_misses",
        "branches",
        "branch_misses",
    ]
    evtsels = []
    previous: dict[str, int] = {}
    for k in range(6):
        clock.advance(0.5)
        truth_clock.advance(0.5)
        (s,) = engine.tick()
        (t,) = truth.tick()
        evtsels.append(platform.machine.msr(0).read(registers.evtsel(0)))
        counted = ["llc_misses", "branches"] if k % 2 == 0 else ["branch_misses"]
        resting = ["branch_misses"] if k % 2 == 0 else ["llc_misses", "branches"]
        for key in ["instructions", "cycles", *counted]:
            assert s.counts[key] == t.counts[key], (k, key)
        for key in resting:
            if k == 0:
                assert key not in s.counts  # never counted yet: nothing to show
            else:
                # The rate per unhalted cycle it had when last counted, times this interval's cycles.
                per_cycle = previous[key] / previous["cycles"]
                assert s.counts[key] == round(per_cycle * s.counts["cycles"]), (k, key)
        assert s.suspect is None
        if k >= 2:
            assert s.estimated == {"llc_misses": 0.5, "branches": 0.5, "branch_misses": 0.5}
        previous = {key: s.counts[key] for key in [*counted, "cycles"]}
    # The next interval's group is programmed at the end of each read.
    assert evtsels[:3] == [0x4300C5, 0x43412E, 0x4300C5]
    assert engine.stop().failures == []
    assert regs(platform, 0, [registers.evtsel(0), registers.evtsel(1)]) == {
        registers.evtsel(0): 0,
        registers.evtsel(1): 0,
    }
    truth.stop()


def test_rotation_can_be_refused(sim: SimPlatform) -> None:
    from pmutop.pmu.cpuid_decode import decode_perfmon
    from pmutop.pmu.plan import plan_counters

    pm = decode_perfmon(sim.cpuid_fn(0))
    events = parse_events(["llc-misses,branches,branch-misses,llc-references,event=0xc4,umask=1"])
    with pytest.raises(UsageError, match=r"5 programmable events .* do not fit the 4 general-purpose counters"):
        plan_counters(pm, events, cpu=0, rotate=False)
    plan = plan_counters(pm, events, cpu=0)
    assert [len(g) for g in plan.gp_groups] == [4, 1] and plan.rotating


def test_counter_restricted_events_are_placed_on_allowed_counters(clock: ManualClock) -> None:
    from dataclasses import replace

    llc, br, brm = parse_events(["llc-misses,branches,branch-misses"])
    only_counter_2 = replace(br, counters=0b0100)
    only_low_two = replace(brm, counters=0b0011)
    platform, backend, engine = make(clock, SimConfig(cpus=1, seed=3), events=[llc, only_counter_2, only_low_two])
    engine.start()
    placements = {p.event.key: p.index for p in backend.counters(0).setup.plan.gp}
    assert placements["branches"] == 2
    assert placements["branch_misses"] in (0, 1)
    assert regs(platform, 0, [registers.evtsel(2)])[registers.evtsel(2)] == 0x4300C4
    engine.stop()


def test_software_events_need_the_perf_backend(clock: ManualClock) -> None:
    _, _, engine = make(clock, SimConfig(cpus=1, seed=3), events=parse_events(["context-switches"]))
    with pytest.raises(UsageError, match="context-switches is a kernel software event: it needs --backend perf"):
        engine.start()
    engine.stop()


def test_raw_event_encoding_reaches_the_evtsel(clock: ManualClock) -> None:
    events = parse_events(["event=0xc4,umask=0x01,cmask=2,inv,edge"])
    platform, backend, engine = make(clock, SimConfig(cpus=1, seed=3), events=events)
    engine.start()
    assert backend.counters(0).keys == ["instructions", "cycles", "ref_cycles", "r28401c4"]
    expected = (
        0xC4
        | 0x01 << 8
        | registers.EVTSEL_EDGE
        | registers.EVTSEL_INV
        | 2 << 24
        | registers.EVTSEL_USR
        | registers.EVTSEL_OS
        | registers.EVTSEL_EN
    )
    assert regs(platform, 0, [registers.evtsel(0)])[registers.evtsel(0)] == expected
    engine.stop()


def test_v5_pmu_with_four_fixed_counters_programs_without_reserved_bits(clock: ManualClock) -> None:
    platform, _, engine = make(clock, SimConfig(cpus=1, version=5, fixed_counters=4, gp_counters=8, seed=3))
    engine.start()  # the simulator faults (EIO) on AnyThread or any reserved bit
    clock.advance(1.0)
    (s,) = engine.tick()
    assert s.suspect is None and s.counts["instructions"] > 0
    assert regs(platform, 0, [registers.IA32_PERF_GLOBAL_CTRL])[registers.IA32_PERF_GLOBAL_CTRL] == 0x7_0000_000F
    engine.stop()


def test_rdpmc_fault_falls_back_to_msr_reads_once(clock: ManualClock) -> None:
    _platform, backend, engine = make(clock, SimConfig(cpus=2, seed=3, rdpmc_enabled=False))
    engine.start()
    assert backend.read_method == "msr"
    assert sum("reading counters through the MSR files" in n for n in backend.notices) == 1
    clock.advance(1.0)
    assert all(s.counts["cycles"] > 0 for s in engine.tick())
    engine.stop()


def test_explicit_rdpmc_that_faults_is_an_error(clock: ManualClock) -> None:
    _, _, engine = make(clock, SimConfig(cpus=1, seed=3, rdpmc_enabled=False), read_method="rdpmc")
    with pytest.raises(HardwareError, match="--read rdpmc: rdpmc faults"):
        engine.start()
    engine.stop()


def test_every_msr_write_outside_the_pmu_allowlist_is_refused(sim: SimPlatform) -> None:
    dev = sim.machine.msr(0)
    for address in (
        registers.IA32_TIME_STAMP_COUNTER,
        registers.IA32_PERF_GLOBAL_STATUS,
        0x1A0,
        0x199,
        registers.IA32_PERF_GLOBAL_INUSE,
    ):
        with pytest.raises(ForbiddenMsrWrite, match="not a PMU register"):
            dev.write(address, 0)
    dev.write(registers.IA32_PERF_GLOBAL_CTRL, 0)  # allowed


RDPMC = RDPMC_SYSFS[0]


def test_rdpmc_sysfs_1_is_set_to_2_for_the_run_and_back(clock: ManualClock) -> None:
    platform, backend, engine = make(clock, settings={RDPMC: "1"})
    engine.start()
    assert backend.read_method == "rdpmc"
    assert platform.settings[RDPMC] == "2"
    assert any(f"set /{RDPMC} to 2" in n for n in backend.notices)
    clock.advance(1.0)
    assert all(s.counts["cycles"] > 0 for s in engine.tick())
    engine.stop()
    assert platform.settings[RDPMC] == "1"


def test_rdpmc_sysfs_0_is_respected(clock: ManualClock) -> None:
    platform, backend, engine = make(clock, settings={RDPMC: "0"})
    engine.start()
    assert backend.read_method == "msr"
    assert platform.settings[RDPMC] == "0"
    engine.stop()


def test_failed_probe_puts_rdpmc_sysfs_back_at_once(clock: ManualClock) -> None:
    platform, backend, engine = make(clock, SimConfig(cpus=1, seed=3, rdpmc_enabled=False), settings={RDPMC: "1"})
    engine.start()
    assert backend.read_method == "msr"
    assert platform.settings[RDPMC] == "1"  # not left at 2 for the whole run
    engine.stop()
    assert platform.settings[RDPMC] == "1"


def test_foreign_reprogramming_is_found_within_the_check_period_at_one_register_read_per_sample(
    clock: ManualClock,
) -> None:
    from pmutop.backends.msr.counters import FOREIGN_CHECK_NS

    platform, backend, engine = make(clock)
    engine.set_interval(0.1)
    engine.start()
    dev = backend.counters(1).setup.dev
    reads: list[int] = []
    raw = dev._read_raw
    dev._read_raw = lambda a: reads.append(a) or raw(a)  # type: ignore[method-assign]
    for _ in range(25):
        clock.advance(0.1)
        assert all(s.suspect is None for s in engine.tick())
    # Between checks a sample reads GLOBAL_STATUS only (the counters come through rdpmc); every control
    # register is read once per check period.
    checks = 25 * 100_000_000 // FOREIGN_CHECK_NS
    assert len(reads) <= 25 + checks * len(CONTROL), reads
    platform.machine.foreign_write(1, registers.evtsel(1), 0x4300C0)
    changed_at = clock.now_ns()
    found_at = None
    for _ in range(40):
        clock.advance(0.1)
        s0, s1 = engine.tick()
        assert s0.suspect is None
        if found_at is None and "IA32_PERFEVTSEL1" in (s1.suspect or ""):
            found_at = clock.now_ns()
        if found_at is not None:  # and on every sample after, while the register stays taken
            assert s1.suspect is not None and "IA32_PERFEVTSEL1" in s1.suspect
    assert found_at is not None and found_at - changed_at <= FOREIGN_CHECK_NS + 100_000_000
    engine.stop()


def test_installed_without_the_c_shim_it_reads_through_the_msr_files_and_says_why_once(
    clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    platform, backend, engine = make(clock)
    monkeypatch.setattr(platform, "shim_missing", lambda: True, raising=False)
    engine.start()
    assert backend.read_method == "msr"
    said = [n for n in backend.notices if "C shim is not built" in n]
    assert len(said) == 1 and "rdpmc" in said[0] and "self-test" in said[0] and "C compiler" in said[0]
    clock.advance(1.0)
    assert all(s.counts["cycles"] > 0 for s in engine.tick())
    engine.stop()


def test_explicit_rdpmc_without_the_c_shim_is_one_clear_error(
    clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    platform, _, engine = make(clock, read_method="rdpmc")
    monkeypatch.setattr(platform, "shim_missing", lambda: True, raising=False)
    with pytest.raises(HardwareError, match="--read rdpmc: the pmutop C shim is not built"):
        engine.start()
    engine.stop()


def test_a_control_register_that_cannot_be_read_for_the_foreign_use_check_fails_as_its_read_does(
    clock: ManualClock,
) -> None:
    from pmutop.hw.msr import MsrAccessError, MsrDevice

    platform, backend, engine = make(clock)
    engine.start()
    dev = platform.machine.msr(1)
    real = dev._read_raw

    def failing(address: int) -> int:
        if address == registers.IA32_FIXED_CTR_CTRL:
            raise MsrAccessError(1, address, "read", 5)
        return real(address)

    dev._read_raw = failing  # type: ignore[method-assign]
    dev.read_many = lambda addresses: MsrDevice.read_many(dev, addresses)  # type: ignore[method-assign]
    with pytest.raises(MsrAccessError, match=r"cpu 1: read of IA32_FIXED_CTR_CTRL \(0x38d\) failed"):
        backend.counters(1).foreign_changes()  # type: ignore[attr-defined]
    assert backend.counters(0).foreign_changes() == []  # type: ignore[attr-defined]
    engine.stop()
