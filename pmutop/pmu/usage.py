"""Reading PMU control registers for signs that another agent (perf, a tool, the BIOS) owns the counters."""

from __future__ import annotations

from pmutop.pmu import registers
from pmutop.pmu.cpuid_decode import PerfmonInfo

WATCHDOG_EVENT = (0x3C, 0x00)  # the hard-lockup detector counts unhalted core cycles


def describe_evtsel(value: int) -> str:
    parts = []
    if value & registers.EVTSEL_EN:
        parts.append("enabled")
    if value & 0xFFFF:
        parts.append(f"event {value & 0xFF:#04x} umask {value >> 8 & 0xFF:#04x}")
    if value & registers.EVTSEL_INT:
        parts.append("PMI")
    return f"{value:#x}: " + ", ".join(parts)


def find_foreign_use(perfmon: PerfmonInfo, regs: dict[int, int], *, tolerate_watchdog: bool) -> list[tuple[int, str]]:
    """Registers showing that someone else uses this PMU, as (address, description).

    `regs` holds every existing PERFEVTSEL, FIXED_CTR_CTRL and (v4+) GLOBAL_INUSE. With
    `tolerate_watchdog`, the NMI watchdog's own counter (cycles on fixed counter 1, or event 0x3C
    with PMI on a GP counter) is not counted: pmutop switches the watchdog off before programming.
    """
    found: list[tuple[int, str]] = []
    explained_inuse = 0
    rmap = perfmon.registers
    for i in perfmon.gp_indexes:
        v = regs[rmap.evtsel(i)]
        busy = v & (registers.EVTSEL_EN | registers.EVTSEL_INT | registers.EVTSEL_EVENT_MASK)
        if not busy:
            continue
        if tolerate_watchdog and (v & 0xFF, v >> 8 & 0xFF) == WATCHDOG_EVENT:
            explained_inuse |= registers.gp_bit(i) | registers.INUSE_PMI
            continue
        detail = describe_evtsel(v)
        if not v & registers.EVTSEL_EN:
            detail += " (programmed but disabled; perhaps left by perf: --force takes over)"
        found.append((rmap.evtsel(i), detail))
    fixed_ctrl = regs[registers.IA32_FIXED_CTR_CTRL]
    for i in sorted(set(range(registers.MAX_FIXED_COUNTERS)) | set(perfmon.fixed_indexes)):  # Atom v6: fixed 4-6
        nibble = registers.fixed_ctrl_nibble(fixed_ctrl, i)
        if not nibble & (registers.FIXED_EN_OS | registers.FIXED_EN_USR | registers.FIXED_PMI):
            continue
        if tolerate_watchdog and i == 1:
            explained_inuse |= registers.fixed_bit(1) | registers.INUSE_PMI
            continue
        what = "PMI" if nibble & registers.FIXED_PMI and not nibble & 3 else "enabled"
        found.append((registers.IA32_FIXED_CTR_CTRL, f"{fixed_ctrl:#x}: fixed counter {i} {what}"))
        break
    inuse = regs.get(registers.IA32_PERF_GLOBAL_INUSE, 0) & ~explained_inuse
    if inuse and not found:
        found.append((registers.IA32_PERF_GLOBAL_INUSE, f"{inuse:#x}"))
    return found
