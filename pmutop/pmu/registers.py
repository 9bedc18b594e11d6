"""Intel core-PMU MSR addresses and bit layouts (SDM vol. 3 ch. 20/21, vol. 4 table 2-2).

Pure data and encoders: nothing here touches hardware.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field

from pmutop.core.errors import HardwareError

IA32_TIME_STAMP_COUNTER = 0x10
IA32_PMC0 = 0xC1  # legacy GP counters: writes are sign-extended from bit 31
IA32_PERFEVTSEL0 = 0x186
IA32_FIXED_CTR0 = 0x309
IA32_FIXED_CTR3 = 0x30C  # TOPDOWN.SLOTS (Linux msr-index.h MSR_CORE_PERF_FIXED_CTR3; PCM types.h TOPDOWN_SLOTS_ADDR)
# Top-down level 1 (and, from Golden Cove, level 2) fractions of the slots fixed counter 3 counts: one byte
# each, out of 0xFF. Linux msr-index.h MSR_PERF_METRICS 0x00000329; PCM types.h PERF_METRICS_ADDR.
MSR_PERF_METRICS = 0x329
IA32_PERF_CAPABILITIES = 0x345
IA32_FIXED_CTR_CTRL = 0x38D  # the same address on v6 ("the MSR address of the fixed counter control is not changed")
IA32_PERF_GLOBAL_STATUS = 0x38E
IA32_PERF_GLOBAL_CTRL = 0x38F
IA32_PERF_GLOBAL_STATUS_RESET = 0x390  # called OVF_CTRL before v4; write-1-to-clear
IA32_PERF_GLOBAL_STATUS_SET = 0x391  # v4+, write-only
IA32_PERF_GLOBAL_INUSE = 0x392  # v4+
IA32_A_PMC0 = 0x4C1  # full-width alias, only when PERF_CAPABILITIES[13]

# PMU v6 "MSR aliasing": one block of 4 MSRs per counter (CTR, CFG_A = event select, CFG_B, CFG_C).
# Linux arch/x86/include/asm/msr-index.h MSR_IA32_PMC_V6_GP0_CTR / _GP0_CFG_A / _FX0_CTR / _STEP, added by
# commit 149fd4712bcd "perf/x86/intel: Support Perfmon MSRs aliasing" (tip perf/core, July 2024; v6.11).
# The SDM names them IA32_PMC_GPn_CTR / IA32_PMC_GPn_CFG_A / IA32_PMC_FXn_CTR.
IA32_PMC_V6_GP0_CTR = 0x1900
IA32_PMC_V6_GP0_CFG_A = 0x1901  # CFG_B (+2, auto-counter reload) and CFG_C (+3) are never pmutop's
IA32_PMC_V6_FX0_CTR = 0x1980
IA32_PMC_V6_STEP = 4

# IA32_PERF_CAPABILITIES bits
PERF_CAP_FW_WRITE = 1 << 13  # full-width writes through IA32_A_PMCx
PERF_CAP_PERF_METRICS = 1 << 15  # Linux msr-index.h PERF_CAP_PERF_METRICS BIT_ULL(15); PCM isHWTMAL1Supported

# How many counters a register map can address. The legacy blocks hold 8 GP counters (0x186..0x18D,
# 0xC1..0xC8, 0x4C1..0x4C8: 0x18E, 0xC9.., 0x4C9.. are other registers) and 4 fixed (0x309..0x30C; fixed
# 4-6 exist only on Atom v6 cores, Linux asm/perf_event.h). The v6 range is what the kernel can address:
# INTEL_PMC_MAX_GENERIC = 32 (CPUID 0x23.1 EAX is a 32-bit bitmap) and INTEL_PMC_MAX_FIXED = 16
# (asm/perf_event.h); 32 GP blocks of 4 end exactly at IA32_PMC_V6_FX0_CTR.
LEGACY_MAX_GP = 8
LEGACY_MAX_FIXED = 4
V6_MAX_GP = 32
V6_MAX_FIXED = 16
MAX_FIXED_COUNTERS = 4  # pmutop drives fixed counters 0-3 only (instructions, cycles, ref-cycles, slots)


class CounterIndexError(HardwareError, IndexError):
    """A counter index this PMU's register map has no MSR for."""


@dataclass(frozen=True)
class CounterRegisters:
    """Where one PMU keeps its counters and event selects: made by `register_map(version)`, never by hand.

    Counter i's registers are `base + step * i`. On the legacy map a GP counter has two write addresses:
    IA32_PMCx sign-extends bit 31, IA32_A_PMCx takes full-width values (if PERF_CAPABILITIES[13]).
    """

    kind: str  # "legacy" or "v6"
    max_gp: int
    max_fixed: int
    step: int
    evtsel0: int
    pmc0: int
    full_width_pmc0: int
    fixed0: int
    gp_name: str = field(repr=False, default="")  # format strings for MSR_NAMES, {i} = index
    evtsel_name: str = field(repr=False, default="")
    full_width_name: str = field(repr=False, default="")
    fixed_name: str = field(repr=False, default="")

    def _gp(self, base: int, i: int) -> int:
        if not 0 <= i < self.max_gp:
            raise CounterIndexError(
                f"GP counter {i} has no {self.kind} PMU register (counters 0-{self.max_gp - 1} only"
                + ("; more than 8 exist only in the PMU v6 range)" if self.kind == "legacy" else ")")
            )
        return base + self.step * i

    def evtsel(self, i: int) -> int:
        """Event select of GP counter i (IA32_PERFEVTSELx, or IA32_PMC_GPx_CFG_A on v6)."""
        return self._gp(self.evtsel0, i)

    def pmc(self, i: int) -> int:
        """GP counter i as read (also the sign-extending write address on the legacy map)."""
        return self._gp(self.pmc0, i)

    def counter(self, i: int, *, full_width: bool) -> int:
        """Where to write a value into GP counter i; `full_width` = IA32_PERF_CAPABILITIES[13] (FW_WRITE).

        Without FW_WRITE only values that survive sign extension from bit 31 may be written (check with
        `sign_extend_legacy_pmc_write`); that rule is kept on v6 too, as Linux does (see `register_map`).
        """
        return self._gp(self.full_width_pmc0 if full_width else self.pmc0, i)

    def fixed_ctr(self, i: int) -> int:
        if not 0 <= i < self.max_fixed:
            raise CounterIndexError(f"fixed counter {i} has no {self.kind} PMU register (0-{self.max_fixed - 1} only)")
        return self.fixed0 + self.step * i

    def gp_registers(self, i: int) -> tuple[int, ...]:
        """Every address pmutop may write for GP counter i (event select, counter, full-width counter)."""
        return tuple(dict.fromkeys((self.evtsel(i), self.pmc(i), self.counter(i, full_width=True))))

    def writable(self, n_gp: int | None = None, n_fixed: int | None = None) -> Iterator[int]:
        """Every counter and event-select address of GP counters 0..n_gp-1 and fixed 0..n_fixed-1
        (default: all this map can address)."""
        n_gp = self.max_gp if n_gp is None else min(n_gp, self.max_gp)
        n_fixed = self.max_fixed if n_fixed is None else min(n_fixed, self.max_fixed)
        for i in range(n_gp):
            yield from self.gp_registers(i)
        for i in range(n_fixed):
            yield self.fixed_ctr(i)

    def names(self) -> dict[int, str]:
        out: dict[int, str] = {}
        for i in range(self.max_gp):
            out[self.evtsel(i)] = self.evtsel_name.format(i=i)
            out[self.pmc(i)] = self.gp_name.format(i=i)
            out.setdefault(self.counter(i, full_width=True), self.full_width_name.format(i=i))
        for i in range(self.max_fixed):
            out[self.fixed_ctr(i)] = self.fixed_name.format(i=i)
        return out


LEGACY_REGISTERS = CounterRegisters(
    kind="legacy",
    max_gp=LEGACY_MAX_GP,
    max_fixed=LEGACY_MAX_FIXED,
    step=1,
    evtsel0=IA32_PERFEVTSEL0,
    pmc0=IA32_PMC0,
    full_width_pmc0=IA32_A_PMC0,
    fixed0=IA32_FIXED_CTR0,
    gp_name="IA32_PMC{i}",
    evtsel_name="IA32_PERFEVTSEL{i}",
    full_width_name="IA32_A_PMC{i}",
    fixed_name="IA32_FIXED_CTR{i}",
)

# Linux intel_pmu_init (commit 149fd4712bcd): `if (x86_pmu.version >= 6)` it sets perfctr = GP0_CTR,
# eventsel = GP0_CFG_A, fixedctr = FX0_CTR and addr_offset = intel_pmu_v6_addr_offset (STEP * index), so
# every counter, 0-7 included, is programmed in this range; x86_pmu_event_addr / x86_pmu_config_addr /
# x86_pmu_fixed_ctr_addr (arch/x86/events/perf_event.h) add the offset to the base.
# Full width: that block runs after the full-width one (`if (intel_cap.full_width_write)`: max_period =
# cntval_mask >> 1, perfctr = MSR_IA32_PMC0), overriding perfctr but not max_period. So with FW_WRITE the
# kernel writes full-width values to GPn_CTR (there is no separate alias); without it its periods stay below
# 2^31, whose counter values are the same whether or not the write sign-extends bit 31.
# rdpmc is unchanged: event_base_rdpmc = x86_pmu_rdpmc_index(idx) = idx for Intel (no rdpmc_index hook), so
# GP counter 9 is read with ECX = 9 (arch/x86/events/core.c x86_assign_hw_event).
V6_REGISTERS = CounterRegisters(
    kind="v6",
    max_gp=V6_MAX_GP,
    max_fixed=V6_MAX_FIXED,
    step=IA32_PMC_V6_STEP,
    evtsel0=IA32_PMC_V6_GP0_CFG_A,
    pmc0=IA32_PMC_V6_GP0_CTR,
    full_width_pmc0=IA32_PMC_V6_GP0_CTR,
    fixed0=IA32_PMC_V6_FX0_CTR,
    gp_name="IA32_PMC_GP{i}_CTR",
    evtsel_name="IA32_PMC_GP{i}_CFG_A",
    full_width_name="IA32_PMC_GP{i}_CTR",
    fixed_name="IA32_PMC_FX{i}_CTR",
)


def register_map(version: int) -> CounterRegisters:
    """The registers the kernel programs on an architectural PMU of this version (v6 range from v6 on)."""
    return V6_REGISTERS if version >= 6 else LEGACY_REGISTERS


# The module-level helpers name the legacy registers (counters 0-7); use register_map(version) for a real PMU.
def pmc(i: int) -> int:
    return LEGACY_REGISTERS.pmc(i)


def a_pmc(i: int) -> int:
    return LEGACY_REGISTERS.counter(i, full_width=True)


def evtsel(i: int) -> int:
    return LEGACY_REGISTERS.evtsel(i)


def fixed_ctr(i: int) -> int:
    return LEGACY_REGISTERS.fixed_ctr(i)


# Control registers pmutop writes; their addresses are the same on every version.
CONTROL_WRITABLE_MSRS: frozenset[int] = frozenset(
    [IA32_FIXED_CTR_CTRL, IA32_PERF_GLOBAL_CTRL, IA32_PERF_GLOBAL_STATUS_RESET]
)
# Top-down: PERF_METRICS, zeroed with fixed counter 3 after every read and put back on restore. Fixed
# counter 3 itself is a counter of both maps (in `writable` below); nothing else is needed.
TOPDOWN_WRITABLE_MSRS: frozenset[int] = frozenset([MSR_PERF_METRICS])

# The only MSRs pmutop ever writes: the counters and event selects of both maps for every index the planner
# can place (GP up to each map's limit, fixed 0-3), the control registers and PERF_METRICS. Everything else
# (status, INUSE, TSC, capabilities, CFG_B/CFG_C) is read-only to us.
PMU_WRITABLE_MSRS: frozenset[int] = frozenset(
    itertools.chain(
        CONTROL_WRITABLE_MSRS,
        TOPDOWN_WRITABLE_MSRS,
        *(m.writable(n_fixed=MAX_FIXED_COUNTERS) for m in (LEGACY_REGISTERS, V6_REGISTERS)),
    )
)

MSR_NAMES: dict[int, str] = {
    IA32_TIME_STAMP_COUNTER: "IA32_TIME_STAMP_COUNTER",
    IA32_PERF_CAPABILITIES: "IA32_PERF_CAPABILITIES",
    IA32_FIXED_CTR_CTRL: "IA32_FIXED_CTR_CTRL",
    IA32_PERF_GLOBAL_STATUS: "IA32_PERF_GLOBAL_STATUS",
    IA32_PERF_GLOBAL_CTRL: "IA32_PERF_GLOBAL_CTRL",
    IA32_PERF_GLOBAL_STATUS_RESET: "IA32_PERF_GLOBAL_STATUS_RESET",
    IA32_PERF_GLOBAL_STATUS_SET: "IA32_PERF_GLOBAL_STATUS_SET",
    IA32_PERF_GLOBAL_INUSE: "IA32_PERF_GLOBAL_INUSE",
    MSR_PERF_METRICS: "MSR_PERF_METRICS",
    **LEGACY_REGISTERS.names(),
    **V6_REGISTERS.names(),
}


def msr_name(address: int) -> str:
    return MSR_NAMES.get(address, f"MSR {address:#x}")


# IA32_PERFEVTSELx fields
EVTSEL_EVENT_MASK = 0xFF
EVTSEL_UMASK_SHIFT = 8
EVTSEL_USR = 1 << 16
EVTSEL_OS = 1 << 17
EVTSEL_EDGE = 1 << 18
EVTSEL_PC = 1 << 19
EVTSEL_INT = 1 << 20
EVTSEL_ANY = 1 << 21
EVTSEL_EN = 1 << 22
EVTSEL_INV = 1 << 23
EVTSEL_CMASK_SHIFT = 24


@dataclass(frozen=True)
class RawEvent:
    """event select / umask / modifiers of one programmable event (the fields pmutop lets users set)."""

    event: int
    umask: int = 0
    cmask: int = 0
    inv: bool = False
    edge: bool = False

    @property
    def config(self) -> int:
        """The perf-style raw config (no USR/OS/EN), used for names like r412e."""
        return (
            self.event
            | self.umask << EVTSEL_UMASK_SHIFT
            | (EVTSEL_EDGE if self.edge else 0)
            | (EVTSEL_INV if self.inv else 0)
            | self.cmask << EVTSEL_CMASK_SHIFT
        )


def encode_evtsel(ev: RawEvent, *, user: bool, kernel: bool, enable: bool = True) -> int:
    """PERFEVTSEL value for counting `ev`. Never sets INT (no PMI handler is ours), PC, or AnyThread."""
    if not (0 <= ev.event <= 0xFF and 0 <= ev.umask <= 0xFF and 0 <= ev.cmask <= 0xFF):
        raise ValueError(f"event fields out of range: {ev}")
    value = ev.config
    if user:
        value |= EVTSEL_USR
    if kernel:
        value |= EVTSEL_OS
    if enable:
        value |= EVTSEL_EN
    return value


# IA32_FIXED_CTR_CTRL: 4 bits per fixed counter i at bit 4*i
FIXED_EN_OS = 0b0001
FIXED_EN_USR = 0b0010
FIXED_ANY = 0b0100
FIXED_PMI = 0b1000


def encode_fixed_ctrl(counters: list[int] | range, *, user: bool, kernel: bool) -> int:
    """FIXED_CTR_CTRL value enabling the given fixed counters (no AnyThread, no PMI)."""
    nibble = (FIXED_EN_USR if user else 0) | (FIXED_EN_OS if kernel else 0)
    value = 0
    for i in counters:
        value |= nibble << (4 * i)
    return value


def fixed_ctrl_nibble(value: int, i: int) -> int:
    return (value >> (4 * i)) & 0xF


# IA32_PERF_GLOBAL_CTRL / STATUS layout
GLOBAL_FIXED_SHIFT = 32
GLOBAL_CTRL_EN_PERF_METRICS = 1 << 48  # Linux perf_event.h GLOBAL_CTRL_EN_PERF_METRICS 48 (PCM sets it too)
STATUS_PERF_METRICS_OVF = 1 << 48  # Linux GLOBAL_STATUS_PERF_METRICS_OVF_BIT 48
STATUS_TRACE_TOPA_PMI = 1 << 55
STATUS_LBR_FRZ = 1 << 58
STATUS_CTR_FRZ = 1 << 59
STATUS_ASCI = 1 << 60
STATUS_OVF_UNCORE = 1 << 61
STATUS_OVF_BUF = 1 << 62
STATUS_COND_CHGD = 1 << 63
INUSE_PMI = 1 << 63


def gp_bit(i: int) -> int:
    return 1 << i


def fixed_bit(i: int) -> int:
    return 1 << (GLOBAL_FIXED_SHIFT + i)


def global_ctrl_mask(gp: list[int] | range, fixed: list[int] | range) -> int:
    """GLOBAL_CTRL enable bits (and the matching GLOBAL_STATUS overflow bits) for these counters."""
    value = 0
    for i in gp:
        value |= gp_bit(i)
    for i in fixed:
        value |= fixed_bit(i)
    return value


def status_reset_writable_mask(
    version: int, gp_count: int, fixed: list[int] | range, *, perf_metrics: bool = False
) -> int:
    """Bits of IA32_PERF_GLOBAL_STATUS_RESET (0x390) that exist on this PMU version.

    Writing a 1 to a reserved bit faults (EIO through the msr driver), so a status value read from
    0x38E is ANDed with this before it is written back to clear it. `perf_metrics`: the PMU has
    PERF_METRICS, whose overflow bit 48 Linux clears the same way (it acks the status it read).
    """
    mask = global_ctrl_mask(range(gp_count), fixed) | STATUS_OVF_BUF | STATUS_COND_CHGD
    if perf_metrics:
        mask |= STATUS_PERF_METRICS_OVF
    if version >= 3:
        mask |= STATUS_OVF_UNCORE
    if version >= 4:
        mask |= STATUS_TRACE_TOPA_PMI | STATUS_LBR_FRZ | STATUS_CTR_FRZ | STATUS_ASCI
    return mask


def sign_extend_legacy_pmc_write(value: int, width: int) -> int:
    """What a WRMSR to legacy IA32_PMCx stores: EAX[31:0] sign-extended, then cut to the counter width."""
    low = value & 0xFFFFFFFF
    if low & 0x80000000:
        low |= ~0xFFFFFFFF
    return low & ((1 << width) - 1)


# PERF_METRICS fields per CPU model. Linux intel_pmu_init sets num_topdown_events = 4 (level 1 only) for the
# Ice Lake generation (ICELAKE_X/_D/_L, ICELAKE, ICELAKE_NNPI, TIGERLAKE(_L), ROCKETLAKE) and 8 (level 1 and 2)
# for Sapphire Rapids, Alder Lake and every later big core (intel_pmu_init_glc); PCM's isHWTMAL2Supported also
# goes by model. Family 6 display models from Linux intel-family.h.
PERF_METRICS_LEVEL1_ONLY_MODELS: frozenset[int] = frozenset([0x6A, 0x6C, 0x7D, 0x7E, 0x9D, 0x8C, 0x8D, 0xA7])
PERF_METRICS_L1_FIELDS = 4
PERF_METRICS_L2_FIELDS = 8


def perf_metrics_fields(family: int, model: int) -> int:
    """How many PERF_METRICS bytes a CPU with PERF_CAPABILITIES[15] fills: 4 (level 1) or 8 (level 1 and 2)."""
    if family == 6 and model in PERF_METRICS_LEVEL1_ONLY_MODELS:
        return PERF_METRICS_L1_FIELDS
    return PERF_METRICS_L2_FIELDS


def perf_metrics_byte(value: int, i: int) -> int:
    """Field i of PERF_METRICS: 0 retiring, 1 bad speculation, 2 frontend bound, 3 backend bound; level 2:
    4 heavy operations, 5 branch mispredicts, 6 fetch latency, 7 memory bound (Linux INTEL_PMC_IDX_TD_* order,
    icl_get_metrics_event_value: (metric >> 8 * idx) & 0xff)."""
    return value >> (8 * i) & 0xFF


def split_slots(slots: int, metrics: int, fields: int) -> list[int]:
    """Slots per top-down category from one PERF_METRICS value: byte x slots / (sum of the level-1 bytes),
    rounded so that level 1 adds up to `slots` exactly; level 2 on the same scale, at most its parent."""
    # perf_metrics_byte(metrics, k) for every k at once: byte k of the little-endian value.
    shares = metrics.to_bytes(8, "little")[:fields]
    total = shares[0] + shares[1] + shares[2] + shares[3]
    if not total or not slots:
        return [0] * fields
    out: list[int] = []
    edge = cum = 0
    for k in range(4):  # round the running sum, not each part: the parts then add up to slots
        cum += shares[k]
        nxt = (2 * slots * cum + total) // (2 * total)
        out.append(nxt - edge)
        edge = nxt
    for k in range(4, fields):
        out.append(min(out[k - 4], (2 * slots * shares[k] + total) // (2 * total)))
    return out
