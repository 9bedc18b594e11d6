"""Intel core-PMU MSR addresses and bit layouts (SDM vol. 3 ch. 20/21, vol. 4 table 2-2).

Pure data and encoders: nothing here touches hardware.
"""

from __future__ import annotations

from dataclasses import dataclass

IA32_TIME_STAMP_COUNTER = 0x10
IA32_PMC0 = 0xC1  # legacy GP counters: writes are sign-extended from bit 31
IA32_PERFEVTSEL0 = 0x186
IA32_FIXED_CTR0 = 0x309
IA32_PERF_CAPABILITIES = 0x345
IA32_FIXED_CTR_CTRL = 0x38D
IA32_PERF_GLOBAL_STATUS = 0x38E
IA32_PERF_GLOBAL_CTRL = 0x38F
IA32_PERF_GLOBAL_STATUS_RESET = 0x390  # called OVF_CTRL before v4; write-1-to-clear
IA32_PERF_GLOBAL_STATUS_SET = 0x391  # v4+, write-only
IA32_PERF_GLOBAL_INUSE = 0x392  # v4+
IA32_A_PMC0 = 0x4C1  # full-width alias, only when PERF_CAPABILITIES[13]

# IA32_PERF_CAPABILITIES bits
PERF_CAP_FW_WRITE = 1 << 13  # full-width writes through IA32_A_PMCx
PERF_CAP_PERF_METRICS = 1 << 15

MAX_GP_COUNTERS = 8  # legacy address blocks hold 8 (0x186..0x18D); v6 parts with more use another range
MAX_FIXED_COUNTERS = 4


def pmc(i: int) -> int:
    return IA32_PMC0 + i


def a_pmc(i: int) -> int:
    return IA32_A_PMC0 + i


def evtsel(i: int) -> int:
    return IA32_PERFEVTSEL0 + i


def fixed_ctr(i: int) -> int:
    return IA32_FIXED_CTR0 + i


# The only MSRs pmutop ever writes. Everything else (status, INUSE, TSC, capabilities) is read-only to us.
PMU_WRITABLE_MSRS: frozenset[int] = frozenset(
    [evtsel(i) for i in range(MAX_GP_COUNTERS)]
    + [pmc(i) for i in range(MAX_GP_COUNTERS)]
    + [a_pmc(i) for i in range(MAX_GP_COUNTERS)]
    + [fixed_ctr(i) for i in range(MAX_FIXED_COUNTERS)]
    + [IA32_FIXED_CTR_CTRL, IA32_PERF_GLOBAL_CTRL, IA32_PERF_GLOBAL_STATUS_RESET]
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
    **{evtsel(i): f"IA32_PERFEVTSEL{i}" for i in range(MAX_GP_COUNTERS)},
    **{pmc(i): f"IA32_PMC{i}" for i in range(MAX_GP_COUNTERS)},
    **{a_pmc(i): f"IA32_A_PMC{i}" for i in range(MAX_GP_COUNTERS)},
    **{fixed_ctr(i): f"IA32_FIXED_CTR{i}" for i in range(MAX_FIXED_COUNTERS)},
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
# Bits a plain counting config may use; everything above bit 31 (TSX, EQ, UMASK2) is left alone.
EVTSEL_DEFINED_LOW32 = 0xFFFFFFFF


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
STATUS_PERF_METRICS_OVF = 1 << 48
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


def status_reset_writable_mask(version: int, gp_count: int, fixed: list[int] | range) -> int:
    """Bits of IA32_PERF_GLOBAL_STATUS_RESET (0x390) that exist on this PMU version.

    Writing a 1 to a reserved bit faults (EIO through the msr driver), so a status value read from
    0x38E is ANDed with this before it is written back to clear it.
    """
    mask = global_ctrl_mask(range(gp_count), fixed) | STATUS_OVF_BUF | STATUS_COND_CHGD
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
