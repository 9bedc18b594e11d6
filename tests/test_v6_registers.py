"""The per-PMU register map (legacy and PMU v6 "MSR aliasing") and its agreement with the write allowlist.

Addresses from Linux arch/x86/include/asm/msr-index.h (MSR_IA32_PMC_V6_*) and intel/core.c
`intel_pmu_init` (commit 149fd4712bcd "perf/x86/intel: Support Perfmon MSRs aliasing", v6.11).
"""

from __future__ import annotations

import itertools

import pytest
from helpers.cpuid_dumps import cpuid_fn

from pmutop.core.errors import ForbiddenMsrWrite, HardwareError
from pmutop.hw.msr import MsrDevice
from pmutop.pmu import registers
from pmutop.pmu.cpuid_decode import PerfmonInfo, decode_perfmon
from pmutop.pmu.events import ARCH_EVENTS, EventSpec
from pmutop.pmu.plan import plan_counters

INTEL = (0x756E6547, 0x6C65746E, 0x49656E69)


def test_legacy_map_keeps_the_old_addresses() -> None:
    m = registers.register_map(5)
    assert m is registers.LEGACY_REGISTERS and m.kind == "legacy"
    assert [m.evtsel(i) for i in (0, 7)] == [0x186, 0x18D]
    assert [m.pmc(i) for i in (0, 7)] == [0xC1, 0xC8]
    assert [m.counter(i, full_width=True) for i in (0, 7)] == [0x4C1, 0x4C8]
    assert [m.counter(i, full_width=False) for i in (0, 7)] == [0xC1, 0xC8]
    assert [m.fixed_ctr(i) for i in (0, 3)] == [0x309, 0x30C]
    assert (m.max_gp, m.max_fixed) == (8, 4)


def test_module_helpers_delegate_to_the_legacy_map() -> None:
    for i in range(8):
        assert (registers.evtsel(i), registers.pmc(i), registers.a_pmc(i)) == (0x186 + i, 0xC1 + i, 0x4C1 + i)
    for i in range(4):
        assert registers.fixed_ctr(i) == 0x309 + i


@pytest.mark.parametrize("fn", [registers.evtsel, registers.pmc, registers.a_pmc])
def test_no_legacy_register_for_gp_counter_8(fn) -> None:
    # 0x186 + 8 = 0x18E is not an event select: the bug that made 9+ events fail.
    with pytest.raises(registers.CounterIndexError, match="GP counter 8") as exc:
        fn(8)
    assert isinstance(exc.value, HardwareError) and isinstance(exc.value, IndexError)
    with pytest.raises(registers.CounterIndexError):
        fn(-1)


def test_v6_map_is_the_0x1900_range_with_step_4_for_every_counter() -> None:
    m = registers.register_map(6)
    assert m is registers.V6_REGISTERS and m.kind == "v6"
    assert registers.register_map(7) is m  # the kernel tests version >= 6
    # The kernel moves ALL counters (not only >= 8) to the new range on v6.
    assert [m.pmc(i) for i in (0, 1, 8, 9, 31)] == [0x1900, 0x1904, 0x1920, 0x1924, 0x197C]
    assert [m.evtsel(i) for i in (0, 1, 8, 9, 31)] == [0x1901, 0x1905, 0x1921, 0x1925, 0x197D]
    assert m.counter(9, full_width=True) == m.counter(9, full_width=False) == 0x1924
    assert [m.fixed_ctr(i) for i in (0, 3, 15)] == [0x1980, 0x198C, 0x19BC]
    assert (m.max_gp, m.max_fixed) == (32, 16)
    with pytest.raises(registers.CounterIndexError):
        m.evtsel(32)
    with pytest.raises(registers.CounterIndexError):
        m.fixed_ctr(16)


def test_v6_names() -> None:
    assert registers.msr_name(0x1925) == "IA32_PMC_GP9_CFG_A"
    assert registers.msr_name(0x1924) == "IA32_PMC_GP9_CTR"
    assert registers.msr_name(0x1984) == "IA32_PMC_FX1_CTR"
    assert registers.msr_name(0x18E) == "MSR 0x18e"
    assert registers.msr_name(0x1922) == "MSR 0x1922"  # CFG_B: not pmutop's


def test_the_allowlist_is_exactly_both_maps_plus_the_control_registers() -> None:
    expected = set(registers.CONTROL_WRITABLE_MSRS) | set(registers.TOPDOWN_WRITABLE_MSRS)
    for m in (registers.LEGACY_REGISTERS, registers.V6_REGISTERS):
        expected |= set(m.writable(n_fixed=registers.MAX_FIXED_COUNTERS))
    assert expected == registers.PMU_WRITABLE_MSRS
    assert sorted(registers.CONTROL_WRITABLE_MSRS) == [0x38D, 0x38F, 0x390]
    assert sorted(registers.TOPDOWN_WRITABLE_MSRS) == [0x329]  # PERF_METRICS: zeroed with fixed counter 3
    # CFG_B/CFG_C (reload / PEBS configuration) and the fixed CFG registers are never ours.
    for cfg in (0x1902, 0x1903, 0x1926, 0x1927, 0x1982, 0x1983):
        assert cfg not in registers.PMU_WRITABLE_MSRS
    assert 0x18E not in registers.PMU_WRITABLE_MSRS


def test_maps_do_not_overlap_each_other_or_the_control_registers() -> None:
    legacy = list(registers.LEGACY_REGISTERS.writable())
    v6 = list(registers.V6_REGISTERS.writable())
    assert len(set(legacy)) == len(legacy) and len(set(v6)) == len(v6)
    assert not set(legacy) & set(v6)
    assert not (set(legacy) | set(v6)) & set(registers.CONTROL_WRITABLE_MSRS)


class _Dev(MsrDevice):
    cpu = 0

    def __init__(self) -> None:
        self.written: dict[int, int] = {}

    def _read_raw(self, address: int) -> int:
        return self.written.get(address, 0)

    def _write_raw(self, address: int, value: int) -> None:
        self.written[address] = value


def test_the_msr_gate_accepts_v6_counter_9_and_refuses_0x18e() -> None:
    dev = _Dev()
    dev.write(registers.V6_REGISTERS.evtsel(9), 0x4300C0)
    dev.write(registers.V6_REGISTERS.pmc(9), 0)
    assert dev.written == {0x1925: 0x4300C0, 0x1924: 0}
    with pytest.raises(ForbiddenMsrWrite, match="MSR 0x18e"):
        dev.write(0x18E, 0)


# -- agreement with what the decoders and the planner can produce -----------------------------------------


def _cpuid(version: int, gp: int, fixed_mask: int, leaf23: bool) -> PerfmonInfo:
    """A synthetic Intel CPU: leaf 0xA (GP count in EAX[15:8]) and, with leaf23, a 0x23.1 GP bitmap."""
    n_fixed = fixed_mask.bit_length()
    dump = {
        (0, 0): (0x23 if leaf23 else 0xA, *INTEL),
        (1, 0): (0x000B06D1, 0, 0, 0),
        (7, 0): (1, 0, 0, 0),
        (7, 1): ((1 << 8) if leaf23 else 0, 0, 0, 0),
        (0xA, 0): (
            version | min(gp, 0xFF) << 8 | 48 << 16 | 7 << 24,
            0,
            fixed_mask if version >= 5 else 0,
            n_fixed | 48 << 5,
        ),
    }
    if leaf23:
        dump[(0x23, 0)] = (0b11, 0, 0, 0)
        dump[(0x23, 1)] = ((1 << gp) - 1 if gp < 32 else 0xFFFFFFFF, fixed_mask, 0, 0)
    return decode_perfmon(cpuid_fn(dump))


def _events(n: int) -> list[EventSpec]:
    return [EventSpec(f"r{i:02x}c4", registers.RawEvent(0xC4, i)) for i in range(n)]


PERFMONS = [
    _cpuid(v, gp, fx, leaf23)
    for v, gp, fx, leaf23 in itertools.product(range(2, 7), (1, 4, 8, 10, 16, 32), (0x7, 0xF, 0x77), (False, True))
    if leaf23 or v < 6
]


@pytest.mark.parametrize(
    "pm", PERFMONS, ids=lambda p: f"v{p.version}-gp{p.gp_mask:#x}-fx{p.fixed_mask:#x}-{'0x23' if p.leaf23 else '0xA'}"
)
def test_every_address_the_planner_can_reach_is_allowlisted(pm: PerfmonInfo) -> None:
    regs = registers.register_map(pm.version)
    plan = plan_counters(pm, _events(pm.gp_counters + 1), cpu=0)
    gp = {p.index for g in plan.gp_groups for p in g}
    fixed = {p.index for p in plan.fixed}
    assert gp == set(range(min(pm.gp_counters, regs.max_gp)))  # everything usable is used, nothing beyond
    addresses = set()
    for i in gp:
        addresses |= {regs.evtsel(i), regs.pmc(i), regs.counter(i, full_width=True), regs.counter(i, full_width=False)}
    addresses |= {regs.fixed_ctr(i) for i in fixed}
    assert addresses <= registers.PMU_WRITABLE_MSRS
    assert addresses <= set(regs.writable())


def test_a_legacy_pmu_claiming_more_than_8_counters_gets_8() -> None:
    pm = _cpuid(4, 12, 0x7, leaf23=False)
    assert pm.gp_counters == 12
    plan = plan_counters(pm, _events(9), cpu=0)
    assert [len(g) for g in plan.gp_groups] == [8, 1]
    assert plan.n_gp_read == 8


def test_lunar_lake_p_core_counts_ten_events_at_once() -> None:
    pm = _cpuid(6, 10, 0xF, leaf23=True)
    plan = plan_counters(pm, _events(10), cpu=0, rotate=False)
    assert sorted(p.index for p in plan.gp) == list(range(10))
    assert plan.n_gp_read == 10 and not plan.rotating
    assert {p.index for p in plan.fixed} == {0, 1, 2}
    assert ARCH_EVENTS["instructions"].key in plan.keys
