"""Register-level behaviour of the simulated PMU and its synthetic workload."""

from __future__ import annotations

import errno
import random
import struct
import threading

import pytest

from pmutop.core.clock import ManualClock
from pmutop.core.errors import ForbiddenMsrWrite
from pmutop.hw.msr import MsrAccessError, MsrDevice
from pmutop.pmu import registers
from pmutop.pmu.cpuid_decode import decode_perfmon
from pmutop.sim.cpu import SimRdpmcFault
from pmutop.sim.model import SimConfig, SimMachine
from pmutop.sim.workload import Amounts, Counts, PhaseKind, Workload

SEC = 1_000_000_000
CYCLES = registers.RawEvent(0x3C)
INSTRUCTIONS = registers.RawEvent(0xC0)
REF_BUS = registers.RawEvent(0x3C, 0x01)
LLC_MISSES = registers.RawEvent(0x2E, 0x41)


def make(**kw: object) -> tuple[SimMachine, ManualClock]:
    clock = ManualClock()
    return SimMachine(SimConfig(**kw), clock), clock  # type: ignore[arg-type]


def sel(ev: registers.RawEvent, *, user: bool = True, kernel: bool = True, extra: int = 0) -> int:
    return registers.encode_evtsel(ev, user=user, kernel=kernel) | extra


def delta(m: SimMachine, cpu: int, t1: int, t2: int) -> tuple[Counts, Counts]:
    wl = m.workload(cpu)
    return wl.cumulative(t1), wl.cumulative(t2)


def eio(exc: pytest.ExceptionInfo[MsrAccessError], op: str, address: int) -> None:
    assert exc.value.errno == errno.EIO
    assert exc.value.op == op
    assert exc.value.address == address


# -- enables ----------------------------------------------------------------------------------------------


def test_gp_counts_only_when_evtsel_and_global_ctrl_both_enable() -> None:
    m, clock = make()
    dev = m.msr(0)
    assert isinstance(dev, MsrDevice)
    dev.write(registers.evtsel(0), sel(CYCLES))
    dev.write(registers.evtsel(1), sel(CYCLES) & ~registers.EVTSEL_EN)  # GLOBAL_CTRL will allow it, EN does not
    clock.set_ns(1 * SEC)
    assert dev.read(registers.pmc(0)) == 0  # EN set but GLOBAL_CTRL bit 0 clear

    dev.write(registers.IA32_PERF_GLOBAL_CTRL, registers.global_ctrl_mask([0, 1], []))
    clock.set_ns(2 * SEC)
    dev.write(registers.IA32_PERF_GLOBAL_CTRL, 0)
    clock.set_ns(3 * SEC)

    a, b = delta(m, 0, 1 * SEC, 2 * SEC)
    expected = b.total.cycles - a.total.cycles
    assert expected > 0
    assert dev.read(registers.pmc(0)) == expected
    assert dev.read(registers.a_pmc(0)) == expected
    assert dev.read(registers.pmc(1)) == 0


def test_fixed_counter_needs_enable_field_and_global_bit() -> None:
    m, clock = make()
    dev = m.msr(2)
    dev.write(registers.IA32_FIXED_CTR_CTRL, 0x300)  # only fixed 2 has an enable field
    dev.write(registers.IA32_PERF_GLOBAL_CTRL, registers.global_ctrl_mask([], [0, 1]))  # only fixed 0, 1 globally
    clock.set_ns(SEC)
    assert [dev.read(registers.fixed_ctr(i)) for i in range(3)] == [0, 0, 0]


def test_usr_os_split() -> None:
    m, clock = make(fixed_counters=3)
    dev = m.msr(3)
    dev.write(registers.evtsel(0), sel(INSTRUCTIONS, user=True, kernel=False))
    dev.write(registers.evtsel(1), sel(INSTRUCTIONS, user=False, kernel=True))
    dev.write(registers.evtsel(2), sel(INSTRUCTIONS, user=True, kernel=True))
    dev.write(registers.evtsel(3), sel(INSTRUCTIONS, user=False, kernel=False))
    # fixed 0: user only (2), fixed 1: OS only (1), fixed 2: both (3)
    dev.write(registers.IA32_FIXED_CTR_CTRL, 0x312)
    dev.write(registers.IA32_PERF_GLOBAL_CTRL, registers.global_ctrl_mask(range(4), range(3)))
    clock.set_ns(7 * SEC)

    _, c = delta(m, 3, 0, 7 * SEC)
    assert c.user.instructions > 0 and c.kernel.instructions > 0
    assert [dev.read(registers.pmc(i)) for i in range(4)] == [
        c.user.instructions,
        c.kernel.instructions,
        c.total.instructions,
        0,
    ]
    assert dev.read(registers.fixed_ctr(0)) == c.user.instructions
    assert dev.read(registers.fixed_ctr(1)) == c.kernel.cycles
    assert dev.read(registers.fixed_ctr(2)) == c.total.ref_cycles


def test_fixed_counters_equal_workload_integrals() -> None:
    m, clock = make(version=5, fixed_counters=4, tsc_hz=3_000_000_000)
    dev = m.msr(5)
    dev.write(registers.IA32_FIXED_CTR_CTRL, 0x3333)
    dev.write(registers.IA32_PERF_GLOBAL_CTRL, registers.global_ctrl_mask([], range(4)))
    clock.set_ns(2_500_000_000)
    tsc, values = m.read_counters(5, 4, 0)
    c = m.workload(5).cumulative(2_500_000_000).total
    assert tsc == 7_500_000_000
    assert dev.read(registers.IA32_TIME_STAMP_COUNTER) == 7_500_000_000
    assert values == [c.instructions, c.cycles, c.ref_cycles, c.slots]
    assert c.slots == 4 * c.cycles  # the default "skx" shape is 4 wide
    assert 0 < c.ref_cycles <= tsc


def test_gp_architectural_events() -> None:
    m, clock = make(tsc_hz=2_000_000_000)
    dev = m.msr(1)
    dev.write(registers.evtsel(0), sel(REF_BUS))
    dev.write(registers.evtsel(1), sel(LLC_MISSES))
    dev.write(registers.evtsel(2), sel(registers.RawEvent(0xC5)))
    dev.write(registers.evtsel(3), sel(registers.RawEvent(0xA4, 0x01)))
    dev.write(registers.IA32_PERF_GLOBAL_CTRL, 0xF)
    clock.set_ns(3 * SEC)
    w = m.workload(1).cumulative(3 * SEC)
    c = w.total
    # 100 MHz bus rate; user and kernel parts are scaled (and floored) separately
    bus = sum(part.ref_cycles * 100_000_000 // 2_000_000_000 for part in (w.user, w.kernel))
    assert abs(bus - c.ref_cycles // 20) <= 1
    assert [dev.read(registers.pmc(i)) for i in range(4)] == [bus, c.llc_misses, c.branch_misses, c.slots]


def test_raw_and_cmask_events_are_deterministic_and_bounded() -> None:
    def run() -> tuple[list[int], Amounts]:
        m, clock = make(seed=9)
        dev = m.msr(0)
        dev.write(registers.evtsel(0), sel(registers.RawEvent(0xD1, 0x20)))  # a non-architectural event
        dev.write(registers.evtsel(1), sel(registers.RawEvent(0xA3, 0x14, cmask=0x14)))
        dev.write(registers.evtsel(2), sel(registers.RawEvent(0xA3, 0x14, cmask=0x14, edge=True)))
        dev.write(registers.evtsel(3), sel(registers.RawEvent(0x00, 0x01)))
        dev.write(registers.IA32_PERF_GLOBAL_CTRL, 0xF)
        clock.set_ns(4 * SEC)
        return [dev.read(registers.pmc(i)) for i in range(4)], m.workload(0).cumulative(4 * SEC).total

    (raw, cmask, edge, zero), c = run()
    assert 0 < raw <= c.instructions // 2
    assert 0 < cmask <= c.cycles
    assert 0 < edge < cmask
    assert zero == 0
    assert run()[0] == [raw, cmask, edge, zero]


# -- wraps and status ---------------------------------------------------------------------------------------


def test_gp_wrap_at_narrow_width_sets_only_its_status_bit() -> None:
    m, clock = make(gp_width=24, fixed_width=24)
    dev = m.msr(0)
    dev.write(registers.evtsel(0), sel(CYCLES))
    dev.write(registers.evtsel(1), sel(CYCLES))
    dev.write(registers.a_pmc(0), (1 << 24) - 100)
    dev.write(registers.IA32_FIXED_CTR_CTRL, 0x030)
    dev.write(registers.IA32_PERF_GLOBAL_CTRL, registers.global_ctrl_mask([0, 1], [1]))
    clock.set_ns(1_000_000)  # 1 ms: far fewer than 2^24 cycles
    d = m.workload(0).cumulative(1_000_000).total.cycles
    assert 100 < d < 1 << 24
    assert dev.read(registers.pmc(0)) == d - 100
    assert dev.read(registers.pmc(1)) == d
    assert dev.read(registers.fixed_ctr(1)) == d
    assert dev.read(registers.IA32_PERF_GLOBAL_STATUS) == registers.gp_bit(0)


def test_fixed_wrap_sets_bit_32_plus_i_and_value_is_modulo_width() -> None:
    m, clock = make(fixed_width=16)
    dev = m.msr(4)
    dev.write(registers.fixed_ctr(2), 0xFFF0)
    dev.write(registers.IA32_FIXED_CTR_CTRL, 0x300)
    dev.write(registers.IA32_PERF_GLOBAL_CTRL, registers.fixed_bit(2))
    clock.set_ns(SEC // 2)
    ref = m.workload(4).cumulative(SEC // 2).total.ref_cycles
    assert ref > 1 << 16  # wraps many times: still one status bit
    assert dev.read(registers.fixed_ctr(2)) == (0xFFF0 + ref) % (1 << 16)
    assert dev.read(registers.IA32_PERF_GLOBAL_STATUS) == registers.fixed_bit(2)
    assert m.rdpmc(4, 1 << 30 | 2) == (0xFFF0 + ref) % (1 << 16)


@pytest.mark.parametrize("pmi", [False, True], ids=["no PMI", "PMI freezes"])
def test_status_read_alone_shows_a_wrap_as_soon_as_reading_the_counters_first_would(pmi: bool) -> None:
    """GLOBAL_STATUS alone is read without counting up to the present while no counter can wrap meanwhile: at
    every step it reads, and the counters count, exactly what they do when the counters are read first."""
    int_bit = registers.EVTSEL_INT if pmi else 0
    machines = [make(gp_width=32, fixed_width=40, version=4) for _ in range(2)]
    for m, _ in machines:
        dev = m.msr(0)
        dev.write(registers.evtsel(0), sel(CYCLES, extra=int_bit))
        dev.write(registers.evtsel(1), sel(INSTRUCTIONS))
        dev.write(registers.IA32_FIXED_CTR_CTRL, 0x333)
        dev.write(registers.IA32_PERF_GLOBAL_CTRL, registers.global_ctrl_mask([0, 1], [0, 1, 2]))
        dev.write(registers.a_pmc(0), (1 << 32) - 3_000_000)  # about a millisecond of cycles from the wrap
    (alone, clock_a), (first, clock_f) = machines
    statuses = []
    t = 0
    for step in [1, 7, 1_000, 30_000, 200_000, 1, 1, 50_000, 500_000, 10, 3_000_000, 20_000_000]:
        t += step
        clock_a.set_ns(t)
        clock_f.set_ns(t)
        first.read_counters(0, 3, 2)  # counts up to t
        want = first.msr(0).read(registers.IA32_PERF_GLOBAL_STATUS)
        assert alone.msr(0).read(registers.IA32_PERF_GLOBAL_STATUS) == want, t
        statuses.append(want)
    assert statuses[0] == 0 and statuses[-1] & registers.gp_bit(0)  # it did wrap on the way
    assert bool(statuses[-1] & registers.STATUS_CTR_FRZ) == pmi
    assert alone.read_counters(0, 3, 2) == first.read_counters(0, 3, 2)


def test_writing_a_counter_or_zeroing_perf_metrics_between_reads_counts_as_counting_up_to_the_write_first() -> None:
    """A sampler's every read on a top-down part: the counters, then fixed counter 3 and PERF_METRICS zeroed.
    Those writes count only what they discard; what every counter and PERF_METRICS read afterwards is exactly
    what they read when every counter is counted up to each write first (a counter read before each write)."""
    machines = [make(model="spr", gp_width=48) for _ in range(2)]
    for m, _ in machines:
        dev = m.msr(0)
        dev.write(registers.evtsel(0), sel(INSTRUCTIONS))
        dev.write(registers.evtsel(1), sel(LLC_MISSES, kernel=False))
        dev.write(registers.IA32_FIXED_CTR_CTRL, 0x3333)
        ctrl = registers.global_ctrl_mask([0, 1], [0, 1, 2, 3]) | registers.GLOBAL_CTRL_EN_PERF_METRICS
        dev.write(registers.IA32_PERF_GLOBAL_CTRL, ctrl)
    (deferred, _), (counted, _) = machines
    rng = random.Random(4)
    t = 0
    for step in range(300):
        for _, clock in machines:
            clock.set_ns(t)
        got = [deferred.read_counters(0, 4, 2, metrics=True)]
        want = [counted.read_counters(0, 4, 2, metrics=True)]
        for address, value in [
            (registers.fixed_ctr(3), 0),
            (registers.MSR_PERF_METRICS, 0),
            (registers.a_pmc(1), rng.randrange(1 << 20) if step % 7 == 0 else None),
        ]:
            if value is None:
                continue
            t += rng.choice([1, 50, 3_000, 40_000])
            for _, clock in machines:
                clock.set_ns(t)
            counted.read_counters(0, 1, 0)  # counts every counter up to the write
            deferred.msr(0).write(address, value)
            counted.msr(0).write(address, value)
        assert got == want, step
        t += rng.choice([7, 20_000, 1_000_000, 100_000_000])
    for _, clock in machines:
        clock.set_ns(t + 1)
    assert deferred.read_counters(0, 4, 2, metrics=True) == counted.read_counters(0, 4, 2, metrics=True)
    assert deferred.msr(0).read(registers.MSR_PERF_METRICS) == counted.msr(0).read(registers.MSR_PERF_METRICS)


@pytest.mark.parametrize(("width", "mix", "e_core"), [(6, "tma", False), (16, "classic", False), (4, "tma", True)])
def test_no_quantity_of_a_workload_grows_faster_than_the_bound_the_status_read_relies_on(
    width: int, mix: str, e_core: bool
) -> None:
    from pmutop.sim.regimes import max_events_per_ns

    w = Workload(9, 2, 2_400_000_000, e_core=e_core, width=width, mix=mix)
    bound = max_events_per_ns(width, w.tsc_hz)
    prev = w.cumulative(0)
    for k in range(1, 3001):  # 300 s of 100 ms segments: every kind of phase
        now = w.cumulative(k * 100_000_000)
        grown = [b - a for a, b in zip(prev.total, now.total, strict=True)]  # a counter counts both modes at most
        assert max(grown) <= bound * 100_000_000, k
        prev = now


def test_status_reset_is_write_one_to_clear() -> None:
    m, _ = make()
    dev = m.msr(0)
    bits = registers.gp_bit(1) | registers.fixed_bit(0) | registers.STATUS_COND_CHGD
    m.set_status_bits(0, bits)
    assert dev.read(registers.IA32_PERF_GLOBAL_STATUS) == bits
    dev.write(registers.IA32_PERF_GLOBAL_STATUS_RESET, 0)
    assert dev.read(registers.IA32_PERF_GLOBAL_STATUS) == bits
    dev.write(registers.IA32_PERF_GLOBAL_STATUS_RESET, registers.gp_bit(1))
    assert dev.read(registers.IA32_PERF_GLOBAL_STATUS) == registers.fixed_bit(0) | registers.STATUS_COND_CHGD
    dev.write(
        registers.IA32_PERF_GLOBAL_STATUS_RESET,
        registers.gp_bit(0) | registers.fixed_bit(0) | registers.STATUS_COND_CHGD,
    )
    assert dev.read(registers.IA32_PERF_GLOBAL_STATUS) == 0
    assert dev.read(registers.IA32_PERF_GLOBAL_STATUS_RESET) == 0


def test_status_set_register_on_v4() -> None:
    m, _ = make(version=4)
    m.foreign_write(0, registers.IA32_PERF_GLOBAL_STATUS_SET, registers.STATUS_OVF_BUF | registers.gp_bit(3))
    assert m.msr(0).read(registers.IA32_PERF_GLOBAL_STATUS) == registers.STATUS_OVF_BUF | registers.gp_bit(3)
    assert m.msr(0).read(registers.IA32_PERF_GLOBAL_STATUS_SET) == 0
    assert m.msr(1).read(registers.IA32_PERF_GLOBAL_STATUS) == 0


def test_stale_ctr_frz_stops_all_counting_until_cleared() -> None:
    m, clock = make(version=4)
    dev = m.msr(6)
    m.set_status_bits(6, registers.STATUS_CTR_FRZ)
    dev.write(registers.evtsel(0), sel(INSTRUCTIONS))
    dev.write(registers.IA32_FIXED_CTR_CTRL, 0x333)
    dev.write(registers.IA32_PERF_GLOBAL_CTRL, registers.global_ctrl_mask([0], range(3)))
    clock.set_ns(2 * SEC)
    assert m.read_counters(6, 3, 1)[1] == [0, 0, 0, 0]
    dev.write(registers.IA32_PERF_GLOBAL_STATUS_RESET, 0)  # the classic mistake: clears nothing
    clock.set_ns(3 * SEC)
    assert m.read_counters(6, 3, 1)[1] == [0, 0, 0, 0]
    assert dev.read(registers.IA32_PERF_GLOBAL_STATUS) == registers.STATUS_CTR_FRZ

    dev.write(registers.IA32_PERF_GLOBAL_STATUS_RESET, registers.STATUS_CTR_FRZ)
    clock.set_ns(5 * SEC)
    a, b = delta(m, 6, 3 * SEC, 5 * SEC)
    instr = b.total.instructions - a.total.instructions
    assert m.read_counters(6, 3, 1)[1] == [
        instr,
        b.total.cycles - a.total.cycles,
        b.total.ref_cycles - a.total.ref_cycles,
        instr,
    ]


def test_overflow_with_int_freezes_everything_at_the_overflow_instant() -> None:
    m, clock = make(version=4)
    dev = m.msr(0)
    n = 1_000_000
    dev.write(registers.a_pmc(0), (1 << 48) - n)
    dev.write(registers.evtsel(0), sel(CYCLES, extra=registers.EVTSEL_INT))
    dev.write(registers.IA32_FIXED_CTR_CTRL, 0x030)  # fixed 1 counts the same cycles, no PMI
    dev.write(registers.IA32_PERF_GLOBAL_CTRL, registers.gp_bit(0) | registers.fixed_bit(1))
    clock.set_ns(SEC)
    fixed1 = dev.read(registers.fixed_ctr(1))
    pmc0 = dev.read(registers.pmc(0))
    assert n <= fixed1 < n + 64  # stopped within one TSC tick of the overflow
    assert pmc0 == fixed1 - n
    assert dev.read(registers.IA32_PERF_GLOBAL_STATUS) == registers.gp_bit(0) | registers.STATUS_CTR_FRZ
    assert (
        dev.read(registers.IA32_PERF_GLOBAL_INUSE) == registers.gp_bit(0) | registers.fixed_bit(1) | registers.INUSE_PMI
    )
    clock.set_ns(2 * SEC)
    assert (dev.read(registers.fixed_ctr(1)), dev.read(registers.pmc(0))) == (fixed1, pmc0)


def test_overflow_with_int_does_not_freeze_before_v4() -> None:
    m, clock = make(version=3)
    dev = m.msr(0)
    dev.write(registers.a_pmc(0), (1 << 48) - 1000)
    dev.write(registers.evtsel(0), sel(CYCLES, extra=registers.EVTSEL_INT))
    dev.write(registers.IA32_PERF_GLOBAL_CTRL, registers.gp_bit(0))
    clock.set_ns(SEC)
    cycles = m.workload(0).cumulative(SEC).total.cycles
    assert dev.read(registers.pmc(0)) == cycles - 1000
    assert dev.read(registers.IA32_PERF_GLOBAL_STATUS) == registers.gp_bit(0)


# -- faults ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cfg", "address", "value"),
    [
        ({}, registers.evtsel(0), sel(CYCLES) | 1 << 40),
        ({"version": 5}, registers.evtsel(0), sel(CYCLES) | registers.EVTSEL_ANY),
        ({"gp_counters": 4}, registers.IA32_PERF_GLOBAL_CTRL, 0x1F),
        ({"fixed_counters": 3}, registers.IA32_PERF_GLOBAL_CTRL, registers.fixed_bit(3)),
        ({"fixed_counters": 3}, registers.IA32_FIXED_CTR_CTRL, 0x3333),
        ({"version": 5}, registers.IA32_FIXED_CTR_CTRL, 0x337),
        ({"full_width_writes": False}, registers.a_pmc(0), 5),
        ({"gp_width": 40}, registers.a_pmc(0), 1 << 40),
        ({"fixed_width": 40}, registers.fixed_ctr(0), 1 << 40),
        ({"gp_counters": 4}, registers.IA32_PERF_GLOBAL_STATUS_RESET, registers.gp_bit(4)),
    ],
)
def test_reserved_bit_writes_fault_with_eio_and_change_nothing(
    cfg: dict[str, object], address: int, value: int
) -> None:
    m, _ = make(**cfg)
    dev = m.msr(0)
    dev.write(registers.evtsel(0), sel(INSTRUCTIONS))
    dev.write(registers.pmc(0), 7)
    dev.write(registers.fixed_ctr(0), 9)
    dev.write(registers.IA32_FIXED_CTR_CTRL, 0x3)
    m.set_status_bits(0, registers.gp_bit(2))
    before = dev.snapshot()
    counters = [dev.read(registers.pmc(0)), dev.read(registers.fixed_ctr(0))]
    assert before[registers.evtsel(0)] == sel(INSTRUCTIONS)
    with pytest.raises(MsrAccessError) as exc:
        dev.write(address, value)
    eio(exc, "write", address)
    assert dev.snapshot() == before
    assert [dev.read(registers.pmc(0)), dev.read(registers.fixed_ctr(0))] == counters == [7, 9]


def test_anythread_is_accepted_before_v5() -> None:
    m, _ = make(version=4)
    dev = m.msr(0)
    dev.write(registers.evtsel(0), sel(CYCLES) | registers.EVTSEL_ANY)
    dev.write(registers.IA32_FIXED_CTR_CTRL, 0x337)
    assert dev.snapshot()[registers.evtsel(0)] == sel(CYCLES) | registers.EVTSEL_ANY
    assert dev.read(registers.IA32_FIXED_CTR_CTRL) == 0x337


@pytest.mark.parametrize(
    "address",
    [
        registers.IA32_PERF_GLOBAL_STATUS,
        registers.IA32_PERF_GLOBAL_INUSE,
        registers.IA32_PERF_CAPABILITIES,
        0x10,
        0x1A0,
    ],
)
def test_read_only_and_unknown_registers_fault_on_foreign_write(address: int) -> None:
    m, _ = make()
    m.set_status_bits(0, registers.gp_bit(0))
    with pytest.raises(MsrAccessError) as exc:
        m.foreign_write(0, address, 0)
    eio(exc, "write", address)
    assert m.msr(0).read(registers.IA32_PERF_GLOBAL_STATUS) == registers.gp_bit(0)


def test_pmutop_allowlist_blocks_status_write_before_the_simulator() -> None:
    m, _ = make()
    with pytest.raises(ForbiddenMsrWrite):
        m.msr(0).write(registers.IA32_PERF_GLOBAL_STATUS, 0)


@pytest.mark.parametrize(
    ("cfg", "address"),
    [
        ({"gp_counters": 4}, registers.pmc(4)),
        ({"gp_counters": 4}, registers.a_pmc(4)),
        ({"gp_counters": 2}, registers.evtsel(2)),
        ({"fixed_counters": 3}, registers.fixed_ctr(3)),
        ({"version": 3}, registers.IA32_PERF_GLOBAL_INUSE),
        ({"version": 3}, registers.IA32_PERF_GLOBAL_STATUS_SET),
        ({}, 0x329),
        ({}, 0x1A0),  # IA32_MISC_ENABLE: not modelled (APERF 0xE8 is, for the power columns)
    ],
)
def test_missing_registers_fault_on_read(cfg: dict[str, object], address: int) -> None:
    m, _ = make(**cfg)
    with pytest.raises(MsrAccessError) as exc:
        m.msr(0).read(address)
    eio(exc, "read", address)


def test_legacy_pmc_write_sign_extends_eax() -> None:
    m, _ = make(gp_width=48)
    dev = m.msr(0)
    dev.write(registers.pmc(0), 0x8000_0000)
    assert dev.read(registers.pmc(0)) == 0xFFFF_8000_0000
    dev.write(registers.pmc(1), 0x1_7FFF_FFFF)  # EDX is ignored
    assert dev.read(registers.pmc(1)) == 0x7FFF_FFFF
    dev.write(registers.pmc(2), 0xFFFF_FFF6)  # -10
    assert dev.read(registers.a_pmc(2)) == (1 << 48) - 10


def test_perf_capabilities_reports_full_width_writes() -> None:
    assert make(full_width_writes=True)[0].msr(0).read(registers.IA32_PERF_CAPABILITIES) == 1 << 13
    assert make(full_width_writes=False)[0].msr(0).read(registers.IA32_PERF_CAPABILITIES) == 0


def test_global_inuse_bits() -> None:
    m, _ = make(version=4, gp_counters=4, fixed_counters=3)
    dev = m.msr(0)
    assert dev.read(registers.IA32_PERF_GLOBAL_INUSE) == 0
    dev.write(
        registers.evtsel(1), sel(LLC_MISSES) & ~registers.EVTSEL_EN
    )  # programmed but disabled still counts as in use
    dev.write(registers.evtsel(2), registers.EVTSEL_EN | 0x100)  # event select 0: not in use
    dev.write(registers.IA32_FIXED_CTR_CTRL, 0x0208)  # fixed 0: PMI only; fixed 2: user
    assert (
        dev.read(registers.IA32_PERF_GLOBAL_INUSE) == registers.gp_bit(1) | registers.fixed_bit(2) | registers.INUSE_PMI
    )
    dev.write(registers.IA32_FIXED_CTR_CTRL, 0)
    dev.write(registers.evtsel(3), registers.EVTSEL_INT | 0xC0)
    assert dev.read(registers.IA32_PERF_GLOBAL_INUSE) == registers.gp_bit(1) | registers.gp_bit(3) | registers.INUSE_PMI


# -- rdpmc -----------------------------------------------------------------------------------------------


def test_rdpmc_encodings() -> None:
    m, clock = make(gp_counters=2, fixed_counters=3, gp_width=24)
    dev = m.msr(1)
    dev.write(registers.evtsel(0), sel(INSTRUCTIONS))
    dev.write(registers.pmc(1), 0xFFFF_FFFF)  # sign-extends to all ones; only 24 bits exist
    dev.write(registers.IA32_FIXED_CTR_CTRL, 0x333)
    dev.write(registers.IA32_PERF_GLOBAL_CTRL, registers.global_ctrl_mask([0], range(3)))
    clock.set_ns(SEC // 10)
    c = m.workload(1).cumulative(SEC // 10).total
    assert m.rdpmc(1, 0) == c.instructions % (1 << 24) == dev.read(registers.pmc(0))
    assert m.rdpmc(1, 1) == 0xFF_FFFF
    assert m.rdpmc(1, 1 << 30 | 0) == c.instructions
    assert m.rdpmc(1, 1 << 30 | 1) == c.cycles
    assert m.rdpmc(1, 1 << 30 | 2) == c.ref_cycles
    tsc, values = m.read_counters(1, 3, 2)
    assert tsc == 240_000_000
    assert values == [c.instructions, c.cycles, c.ref_cycles, c.instructions % (1 << 24), 0xFF_FFFF]
    for ecx in (2, 1 << 30 | 3, 1 << 29, 1 << 31, 1 << 16):
        with pytest.raises(SimRdpmcFault):
            m.rdpmc(1, ecx)
    with pytest.raises(SimRdpmcFault):
        m.read_counters(1, 4, 0)


def test_rdpmc_disabled_always_faults() -> None:
    m, _ = make(rdpmc_enabled=False)
    with pytest.raises(SimRdpmcFault):
        m.rdpmc(0, 0)
    with pytest.raises(SimRdpmcFault):
        m.rdpmc(0, 1 << 30)
    with pytest.raises(SimRdpmcFault):
        m.read_counters(0, 3, 4)
    assert m.msr(0).read(registers.pmc(0)) == 0  # MSR reads still work


# -- CPUID ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "gp", "fixed", "gp_width", "fixed_width"),
    [(2, 2, 3, 40, 40), (4, 4, 3, 48, 48), (5, 8, 4, 48, 44), (6, 10, 4, 48, 48)],
)
def test_cpuid_leaf_a_decodes_to_config(version: int, gp: int, fixed: int, gp_width: int, fixed_width: int) -> None:
    m, _ = make(version=version, gp_counters=gp, fixed_counters=fixed, gp_width=gp_width, fixed_width=fixed_width)
    eax, ebx, ecx, edx = m.cpuid(3, 0xA)
    assert eax & 0xFF == version
    assert (eax >> 8) & 0xFF == gp
    assert (eax >> 16) & 0xFF == gp_width
    assert eax >> 24 == 7
    assert ebx == 0  # every architectural event available
    assert edx & 0x1F == fixed
    assert (edx >> 5) & 0xFF == fixed_width
    if version >= 5:
        assert ecx == (1 << fixed) - 1
        assert edx >> 15 & 1 == 1
    else:
        assert ecx == 0
        assert edx >> 15 == 0


def test_cpuid_identity_and_brand() -> None:
    m, _ = make()
    eax, ebx, ecx, edx = m.cpuid(0, 0)
    assert eax >= 0xA
    assert struct.pack("<3I", ebx, edx, ecx) == b"GenuineIntel"
    sig, _, ecx1, _ = m.cpuid(0, 1)
    family = (sig >> 8) & 0xF
    model = ((sig >> 16) & 0xF) << 4 | (sig >> 4) & 0xF
    assert (family, model, sig & 0xF) == (6, 0x55, 4)
    assert ecx1 >> 15 & 1 == 1  # PDCM
    assert ecx1 >> 31 == 0  # not a guest
    assert m.cpuid(0, 0x80000000)[0] >= 0x80000004
    brand = b"".join(struct.pack("<4I", *m.cpuid(0, leaf)) for leaf in (0x80000002, 0x80000003, 0x80000004))
    assert brand == b"pmutop simulated CPU".ljust(48, b"\0")
    assert m.cpuid(0, 7)[3] >> 15 & 1 == 0
    assert m.cpuid(0, 0x1A) == (0, 0, 0, 0)
    assert m.cpuid(0, 0x23) == (0, 0, 0, 0)


def test_cpuid_hybrid() -> None:
    m, _ = make(cpus=6, e_cores=2)
    assert m.cpuid(0, 0)[0] >= 0x1A
    assert m.cpuid(0, 7)[3] >> 15 & 1 == 1
    types = [m.cpuid(cpu, 0x1A)[0] >> 24 for cpu in m.cpus]
    assert types == [0x40, 0x40, 0x40, 0x40, 0x20, 0x20]
    assert [m.workload(cpu).e_core for cpu in m.cpus] == [False] * 4 + [True] * 2


def test_bad_config_and_cpu_rejected() -> None:
    with pytest.raises(ValueError):
        SimConfig(version=7)
    with pytest.raises(ValueError, match=r"gp_counters must be 1\.\.8"):
        SimConfig(gp_counters=9)  # the legacy register blocks hold 8
    with pytest.raises(ValueError, match=r"gp_counters must be 1\.\.32"):
        SimConfig(version=6, gp_counters=33)
    m, _ = make(cpus=2)
    with pytest.raises(ValueError):
        m.msr(2)
    assert m.cpus == [0, 1]


# -- concurrency ---------------------------------------------------------------------------------------


def test_concurrent_readers_and_writers_agree_with_the_workload() -> None:
    m, clock = make(cpus=2)
    for cpu in m.cpus:
        dev = m.msr(cpu)
        dev.write(registers.IA32_FIXED_CTR_CTRL, 0x333)
        dev.write(registers.IA32_PERF_GLOBAL_CTRL, registers.global_ctrl_mask([], range(3)))
    stop = threading.Event()
    errors: list[BaseException] = []

    def sampler(cpu: int) -> None:
        last = 0
        try:
            while not stop.is_set():
                _, values = m.read_counters(cpu, 3, 0)
                assert values[0] >= last
                last = values[0]
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=sampler, args=(cpu,)) for cpu in m.cpus]
    for t in threads:
        t.start()
    for _ in range(200):
        clock.advance(0.05)
        m.msr(0).write(registers.IA32_PERF_GLOBAL_CTRL, registers.global_ctrl_mask([], range(3)))  # a restore
    stop.set()
    for t in threads:
        t.join()
    assert errors == []
    for cpu in m.cpus:
        assert m.read_counters(cpu, 3, 0)[1][0] == m.workload(cpu).cumulative(10 * SEC).total.instructions


# -- workload ------------------------------------------------------------------------------------------


def test_workload_is_a_pure_function_of_time() -> None:
    times = [int(x * SEC) for x in (0, 0.05, 0.1, 0.35, 1, 2.5, 7, 7.01, 19.99, 44.4, 90, 123.456)]
    sequential = Workload(7, 3, 2_400_000_000)
    expected = [sequential.cumulative(t) for t in times]
    shuffled = times[:]
    random.Random(5).shuffle(shuffled)
    for pattern in (shuffled, list(reversed(times))):
        w = Workload(7, 3, 2_400_000_000)
        got = {t: w.cumulative(t) for t in pattern}
        assert [got[t] for t in times] == expected
    # reading once at the end matches reading through every intermediate time
    assert Workload(7, 3, 2_400_000_000).cumulative(times[-1]) == expected[-1]
    assert expected[0] == Workload(7, 3, 2_400_000_000).cumulative(0)
    assert expected[-1].tsc == 123_456 * 2_400_000


def test_workload_differs_by_cpu_and_seed() -> None:
    t = 30 * SEC
    a = Workload(1, 0, 2_400_000_000).cumulative(t)
    assert a != Workload(1, 1, 2_400_000_000).cumulative(t)
    assert a != Workload(2, 0, 2_400_000_000).cumulative(t)
    assert a == Workload(1, 0, 2_400_000_000).cumulative(t)


@pytest.mark.parametrize("e_core", [False, True])
def test_workload_consistency_constraints(e_core: bool) -> None:
    w = Workload(3, 11, 2_100_000_000, e_core=e_core)
    prev = w.cumulative(0)
    assert prev.total == (0,) * len(Amounts._fields)
    for step in range(1, 1500):
        c = w.cumulative(step * 61_000_001)  # odd step: lands mid-segment
        for part, before in ((c.user, prev.user), (c.kernel, prev.kernel)):
            assert part.llc_misses <= part.llc_references
            assert part.branch_misses <= part.branches
            assert part.slots == (4 if e_core else 6) * part.cycles
            assert all(x >= y for x, y in zip(part, before, strict=True))
        assert c.total.ref_cycles - prev.total.ref_cycles <= c.tsc - prev.tsc
        prev = c
    assert prev.total.ref_cycles <= prev.tsc


def test_workload_phases_match_their_descriptions() -> None:
    w = Workload(1, 2, 2_400_000_000)
    seen: set[PhaseKind] = set()
    labels = []
    for seg in range(3000):  # 300 s
        t = seg * SEC // 10
        rt = w.rates_at(t)
        labels.append(rt.phase)
        seen.add(rt.regime)
        a, b = w.cumulative(t), w.cumulative(t + SEC // 10)
        d = [y - x for x, y in zip(a.total, b.total, strict=True)]
        cycles, instr, ref, llc_refs, llc_misses = d[:5]
        assert abs(ref / (b.tsc - a.tsc) - rt.util) < 0.001
        assert abs(instr / cycles - rt.ipc) < 0.01
        assert abs(cycles / ref * 2.4 - rt.ghz) < 0.01
        if rt.regime is PhaseKind.BUSY:
            assert rt.util >= 0.9 and 2.0 <= rt.ipc <= 3.5 and llc_misses * 1000 / instr < 1.0
        elif rt.regime is PhaseKind.MEMORY:
            assert 0.2 <= rt.ipc <= 0.7 and 10 <= llc_misses * 1000 / instr <= 40.5
            assert 0.4 <= rt.llc_miss_ratio <= 0.9 and abs(llc_misses / llc_refs - rt.llc_miss_ratio) < 0.01
        else:
            assert rt.util <= 0.05 and 0.5 <= rt.ipc <= 1.0
        assert 0.8 <= rt.ghz <= 4.8
    assert seen == {PhaseKind.IDLE, PhaseKind.BUSY, PhaseKind.MEMORY}
    runs = []
    for label in labels:
        if runs and runs[-1][0] == label:
            runs[-1][1] += 1
        else:
            runs.append([label, 1])
    assert len(runs) >= 10
    assert all(20 <= n <= 200 for _, n in runs[:-1])  # 2-20 s each (the last run is cut off)


def test_e_cores_are_slower() -> None:
    p = Workload(4, 0, 2_400_000_000)
    e = Workload(4, 0, 2_400_000_000, e_core=True)
    for t in (0, 5 * SEC, 50 * SEC):
        rp, re = p.rates_at(t), e.rates_at(t)
        assert re.ghz == pytest.approx(rp.ghz * 0.65)
        assert re.ipc == pytest.approx(rp.ipc * 0.6)
        assert re.util == rp.util
    assert e.cumulative(60 * SEC).total.instructions < p.cumulative(60 * SEC).total.instructions


# -- PMU v6 ------------------------------------------------------------------------------------------------

V6 = registers.V6_REGISTERS


def test_v6_cpuid_enumerates_leaf_23() -> None:
    m, _ = make(version=6, gp_counters=10, fixed_counters=4)
    assert m.cpuid(0, 0)[0] >= 0x23
    assert m.cpuid(0, 7, 0)[0] >= 1  # sub-leaf 1 of leaf 7 exists
    assert m.cpuid(0, 7, 1)[0] >> 8 & 1 == 1  # ArchPerfmonExt
    assert m.cpuid(0, 0x23, 0)[0] == 0b11  # sub-leaves 0 and 1
    assert m.cpuid(0, 0x23, 1)[:2] == (0x3FF, 0xF)
    assert m.cpuid(0, 0x23, 2) == (0, 0, 0, 0)
    pm = decode_perfmon(lambda leaf, sub=0: m.cpuid(0, leaf, sub))
    assert (pm.version, pm.gp_counters, pm.gp_mask, pm.fixed_mask) == (6, 10, 0x3FF, 0xF)
    assert pm.leaf23 is not None and pm.notes == ("counter bitmaps from CPUID 0x23 sub-leaf 1",)
    v5, _ = make(version=5)
    assert v5.cpuid(0, 7, 1) == (0, 0, 0, 0) and v5.cpuid(0, 0x23, 1) == (0, 0, 0, 0)


def test_v6_gp_counter_9_counts_through_the_v6_range_and_rdpmc() -> None:
    m, clock = make(version=6, gp_counters=10)
    dev = m.msr(0)
    dev.write(V6.evtsel(9), sel(INSTRUCTIONS))
    dev.write(V6.evtsel(8), sel(CYCLES))
    dev.write(registers.IA32_PERF_GLOBAL_CTRL, registers.global_ctrl_mask([8, 9], []))
    clock.set_ns(SEC)
    c = m.workload(0).cumulative(SEC).total
    assert dev.read(V6.pmc(9)) == c.instructions == m.rdpmc(0, 9)
    assert dev.read(V6.pmc(8)) == c.cycles == m.rdpmc(0, 8)
    _, values = m.read_counters(0, 3, 10)
    assert values[3 + 8 :] == [c.cycles, c.instructions]
    with pytest.raises(SimRdpmcFault):
        m.rdpmc(0, 10)
    assert dev.snapshot()[V6.evtsel(9)] == sel(INSTRUCTIONS)  # snapshot keys follow the kernel's map
    assert dev.read(registers.IA32_PERF_GLOBAL_INUSE) & 0x300 == 0x300


def test_v6_legacy_addresses_alias_counters_0_to_7() -> None:
    m, clock = make(version=6, gp_counters=10, fixed_counters=3)
    dev = m.msr(1)
    dev.write(registers.evtsel(3), sel(INSTRUCTIONS))
    assert dev.read(V6.evtsel(3)) == sel(INSTRUCTIONS)
    dev.write(V6.evtsel(7), sel(CYCLES))
    assert dev.read(registers.evtsel(7)) == sel(CYCLES)
    dev.write(registers.pmc(0), 5)
    assert dev.read(V6.pmc(0)) == 5
    dev.write(V6.fixed_ctr(2), 11)
    assert dev.read(registers.fixed_ctr(2)) == 11
    dev.write(registers.IA32_PERF_GLOBAL_CTRL, registers.global_ctrl_mask([3], []))
    clock.set_ns(SEC)
    assert dev.read(registers.pmc(3)) == dev.read(V6.pmc(3)) == dev.read(registers.a_pmc(3)) > 0


def test_v6_counter_writes_are_full_width_only_with_fw_write() -> None:
    m, _ = make(version=6, gp_counters=10)
    dev = m.msr(0)
    dev.write(V6.counter(9, full_width=True), 1 << 40)
    assert dev.read(V6.pmc(9)) == 1 << 40
    with pytest.raises(MsrAccessError) as exc:
        m.foreign_write(0, V6.pmc(9), 1 << 48)  # beyond the 48-bit width
    eio(exc, "write", V6.pmc(9))
    m, _ = make(version=6, gp_counters=10, full_width_writes=False)
    dev = m.msr(0)
    dev.write(V6.pmc(9), 0x8000_0000)
    assert dev.read(V6.pmc(9)) == 0xFFFF_8000_0000  # assumed: sign-extends like IA32_PMCx without FW_WRITE


@pytest.mark.parametrize(
    "address",
    [
        V6.evtsel(10),  # beyond the 10 counters
        V6.pmc(10),
        0x1902,  # CFG_B of counter 0: not modelled
        0x1903,  # CFG_C
        0x1926,
        0x18E,  # no legacy event select for counter 8
        0xC9,
        0x4C9,
        V6.fixed_ctr(3),  # only 3 fixed counters
        0x1982,  # fixed CFG_B
    ],
)
def test_v6_missing_registers_fault(address: int) -> None:
    m, _ = make(version=6, gp_counters=10, fixed_counters=3)
    with pytest.raises(MsrAccessError) as exc:
        m.msr(0).read(address)
    eio(exc, "read", address)
    with pytest.raises(MsrAccessError) as exc:
        m.foreign_write(0, address, 0)
    eio(exc, "write", address)


def test_v6_reserved_bits_still_fault() -> None:
    m, _ = make(version=6, gp_counters=10)
    for address, value in [
        (V6.evtsel(9), sel(CYCLES) | registers.EVTSEL_ANY),  # AnyThread deprecated from v5
        (V6.evtsel(9), sel(CYCLES) | 1 << 40),
        (registers.IA32_PERF_GLOBAL_CTRL, registers.gp_bit(10)),
    ]:
        with pytest.raises(MsrAccessError):
            m.foreign_write(0, address, value)
    m.foreign_write(0, registers.IA32_PERF_GLOBAL_CTRL, registers.gp_bit(9))


def test_v6_sixteen_counters() -> None:
    m, clock = make(version=6, gp_counters=16, fixed_counters=4)
    dev = m.msr(2)
    for i in range(16):
        dev.write(V6.evtsel(i), sel(INSTRUCTIONS))
    dev.write(registers.IA32_PERF_GLOBAL_CTRL, registers.global_ctrl_mask(range(16), []))
    clock.set_ns(SEC)
    c = m.workload(2).cumulative(SEC).total
    assert m.read_counters(2, 0, 16)[1] == [c.instructions] * 16
    assert m.cpuid(2, 0x23, 1)[0] == 0xFFFF


def test_a_long_run_keeps_a_bounded_workload_history_and_still_answers_any_time() -> None:
    """Hours of simulated time must not grow the model without bound (a live view runs all day); a read far
    in the past is still answered exactly (deterministic: rebuilt from the seed)."""
    hour = 3600 * SEC
    w = Workload(1, 2, 2_400_000_000, mix="tma")
    for t in range(0, 2 * hour, 5 * SEC):  # a sampler's reads: forward in time
        w.cumulative(t)
    held = len(w._phases)
    assert held <= 64  # about 2 h of phases lasting 2-20 s would be several hundred
    assert len(w._win) <= 65  # cumulative sums of the last few seconds only (issue 24: a flat heap)
    for t in (hour // 3, 7 * SEC, 2 * hour - 1, hour // 3 + SEC // 7):  # far back, then forward, then back
        assert w.cumulative(t) == Workload(1, 2, 2_400_000_000, mix="tma").cumulative(t)
        assert w.rates_at(t) == Workload(1, 2, 2_400_000_000, mix="tma").rates_at(t)
    assert len(w._phases) <= 64


def test_asking_about_the_far_future_first_keeps_every_count_exact() -> None:
    """A phase asked about far ahead (rates_at) is made before the counting reaches it: the phases the counting
    still needs are kept, so the counts on the way there are the same as a fresh workload's."""
    w = Workload(1, 2, 2_400_000_000, mix="tma")
    w.cumulative(5 * SEC)
    w.rates_at(3000 * SEC)  # hundreds of phases ahead
    for t in (6 * SEC, 100 * SEC, 2000 * SEC, 3000 * SEC + 5):
        assert w.cumulative(t) == Workload(1, 2, 2_400_000_000, mix="tma").cumulative(t)


def test_reads_long_before_the_phases_kept_are_exact_and_rebuild_once() -> None:
    """A lookup after a long pause walks the runs since in time order: each read before the phases kept is exact,
    and they share one history rebuilt from the seed."""
    w = Workload(4, 1, 2_400_000_000)
    w.cumulative(900 * SEC)
    fresh = Workload(4, 1, 2_400_000_000)
    for t in range(100 * SEC, 200 * SEC, 7 * SEC // 3):
        assert w.cumulative(t) == fresh.cumulative(t)
    history = w._history
    assert history is not None and w.cumulative(300 * SEC) == fresh.cumulative(300 * SEC)
    assert w._history is history
    assert len(w._phases) <= 8


def test_read_many_answers_every_register_at_one_instant_and_none_where_one_does_not_exist() -> None:
    from pmutop.probes.power import regs

    m, clock = make(model="spr")
    dev = m.msr(2)
    dev.write(registers.IA32_FIXED_CTR_CTRL, 0x30)
    dev.write(registers.IA32_PERF_GLOBAL_CTRL, registers.fixed_bit(1))
    missing = 0x3FE  # core C7 residency: the simulated CPU has only C6
    addresses = (regs.IA32_APERF, regs.IA32_MPERF, registers.IA32_TIME_STAMP_COUNTER, 0x3FD, missing)
    for t in (1, 12_345_678, 3 * SEC + 17):
        clock.set_ns(t)
        one_by_one: list[int | None] = []
        for address in addresses:
            try:
                one_by_one.append(dev.read(address))
            except MsrAccessError:
                one_by_one.append(None)
        assert dev.read_many(addresses) == one_by_one
        assert one_by_one[-1] is None and None not in one_by_one[:-1]
        # The generic device (a file's) reads them in turn, the same way.
        assert MsrDevice.read_many(dev, addresses) == one_by_one


def test_inside_an_instant_every_register_reads_as_at_its_start_and_time_moves_on_after() -> None:
    from pmutop.probes.power import regs

    m, clock = make(model="spr")
    dev = m.msr(1)
    dev.write(registers.IA32_FIXED_CTR_CTRL, 0x3333)
    dev.write(registers.IA32_PERF_GLOBAL_CTRL, registers.global_ctrl_mask([], [0, 1, 2, 3]))
    clock.set_ns(2 * SEC)
    wl = m.workload(1)
    with m.instant(1):
        first = m.read_counters(1, 4, 0, metrics=True)
        clock.set_ns(3 * SEC)  # the clock moves on; the CPU's sample does not
        dev.write(registers.fixed_ctr(3), 0)
        dev.write(registers.MSR_PERF_METRICS, 0)
        assert dev.read(registers.IA32_TIME_STAMP_COUNTER) == first[0] == wl.ticks(2 * SEC)
        total = wl.cumulative(2 * SEC).total
        assert dev.read_many((regs.IA32_APERF, regs.IA32_MPERF)) == [total.cycles, total.ref_cycles]
        assert m.read_counters(1, 3, 0)[1] == first[1][:3]
    tsc, values = m.read_counters(1, 4, 0)
    assert tsc == wl.ticks(3 * SEC)
    moved = wl.cumulative(3 * SEC).total
    assert values == [moved.instructions, moved.cycles, moved.ref_cycles, moved.slots - total.slots]
