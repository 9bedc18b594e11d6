"""Power, thermal and idle MSRs (reads only) and how to decode them.

Addresses: Linux arch/x86/include/asm/msr-index.h (MSR_IA32_APERF 0xe8, MSR_IA32_MPERF 0xe7,
MSR_IA32_THERM_STATUS 0x19c, MSR_IA32_PACKAGE_THERM_STATUS 0x1b1, MSR_IA32_TEMPERATURE_TARGET 0x1a2,
MSR_RAPL_POWER_UNIT 0x606, MSR_PKG_ENERGY_STATUS 0x611, MSR_DRAM_ENERGY_STATUS 0x619, MSR_PP0_ENERGY_STATUS
0x639, MSR_CORE_C3/C6/C7_RESIDENCY 0x3fc/0x3fd/0x3fe, MSR_AMD_RAPL_POWER_UNIT 0xc0010299,
MSR_AMD_CORE_ENERGY_STATUS 0xc001029a, MSR_AMD_PKG_ENERGY_STATUS 0xc001029b); field layouts: SDM vol. 3B
ch. 14.9 (RAPL) and 14.7.5 (thermal), and turbostat (tools/power/x86/turbostat/turbostat.c):
Busy% = 100 * MPERF / TSC, Bzy_MHz = TSC_Hz / 1e6 * APERF / MPERF, Tj = TjMax - digital readout.
None of these addresses is in the write allowlist, and nothing here writes.
"""

from __future__ import annotations

IA32_MPERF = 0xE7
IA32_APERF = 0xE8
IA32_TIME_STAMP_COUNTER = 0x10
IA32_THERM_STATUS = 0x19C
IA32_PACKAGE_THERM_STATUS = 0x1B1
MSR_TEMPERATURE_TARGET = 0x1A2
MSR_RAPL_POWER_UNIT = 0x606
MSR_PKG_ENERGY_STATUS = 0x611
MSR_DRAM_ENERGY_STATUS = 0x619
MSR_PP0_ENERGY_STATUS = 0x639
MSR_CORE_C3_RESIDENCY = 0x3FC
MSR_CORE_C6_RESIDENCY = 0x3FD
MSR_CORE_C7_RESIDENCY = 0x3FE
MSR_AMD_RAPL_POWER_UNIT = 0xC0010299
MSR_AMD_CORE_ENERGY_STATUS = 0xC001029A
MSR_AMD_PKG_ENERGY_STATUS = 0xC001029B

# Core C-state residency counters tick at the TSC rate while the core is in that state (turbostat).
CORE_CSTATE_MSRS = {"C3": MSR_CORE_C3_RESIDENCY, "C6": MSR_CORE_C6_RESIDENCY, "C7": MSR_CORE_C7_RESIDENCY}
# RAPL energy domains: pmutop's name -> (Intel MSR, AMD MSR or None).
INTEL_ENERGY = {"package": MSR_PKG_ENERGY_STATUS, "core": MSR_PP0_ENERGY_STATUS, "dram": MSR_DRAM_ENERGY_STATUS}
AMD_ENERGY = {"package": MSR_AMD_PKG_ENERGY_STATUS, "core": MSR_AMD_CORE_ENERGY_STATUS}

ENERGY_WRAP = 1 << 32  # the energy status counters are 32 bits wide (bits 31:0)
DEFAULT_TJMAX = 100  # turbostat's fallback when MSR_TEMPERATURE_TARGET cannot be read

# IA32_THERM_STATUS / IA32_PACKAGE_THERM_STATUS bits (SDM 14.7.5.2): the *status* bits say "now".
THERM_STATUS_PROCHOT = 1 << 0
THERM_STATUS_CRIT = 1 << 4  # critical temperature status
THERM_STATUS_POWER_LIMIT = 1 << 10  # power limitation status
THERM_READING_VALID = 1 << 31


def energy_unit_joules(power_unit_raw: int) -> float:
    """Energy status unit from MSR_RAPL_POWER_UNIT bits 12:8 (ESU): one count is 1/2^ESU J.
    The AMD register has the same layout (Linux arch/x86/events/rapl.c reads both the same way)."""
    return 1.0 / (1 << ((power_unit_raw >> 8) & 0x1F))


def energy_delta(prev: int, now: int) -> int:
    """Counts between two reads of a 32-bit energy counter, one wrap allowed (at 1/2^14 J units a package
    at 200 W wraps every ~5 minutes, far longer than any interval)."""
    return (now - prev) % ENERGY_WRAP


def tjmax(temperature_target_raw: int) -> int:
    """TjMax in °C: MSR_TEMPERATURE_TARGET bits 23:16 (turbostat set_temperature_target)."""
    value = (temperature_target_raw >> 16) & 0xFF
    return value or DEFAULT_TJMAX


def temperature_c(therm_status_raw: int, tj_max: int) -> float | None:
    """TjMax minus the digital readout (bits 22:16); None when the reading-valid bit 31 is clear."""
    if not therm_status_raw & THERM_READING_VALID:
        return None
    return float(tj_max - ((therm_status_raw >> 16) & 0x7F))


def throttle_flags(therm_status_raw: int) -> list[str]:
    """What limits the clock right now: 'thermal' (PROCHOT/thermal status), 'critical', 'power'."""
    flags = []
    if therm_status_raw & THERM_STATUS_PROCHOT:
        flags.append("thermal")
    if therm_status_raw & THERM_STATUS_CRIT:
        flags.append("critical")
    if therm_status_raw & THERM_STATUS_POWER_LIMIT:
        flags.append("power")
    return flags


# throttle_flags as a tuple for each combination of the bits it looks at: one dict lookup per CPU and interval.
THROTTLE_BITS = THERM_STATUS_PROCHOT | THERM_STATUS_CRIT | THERM_STATUS_POWER_LIMIT
THROTTLE = {bits: tuple(throttle_flags(bits)) for bits in range(THROTTLE_BITS + 1) if not bits & ~THROTTLE_BITS}


def busy_and_mhz(aperf: int, mperf: int, tsc: int, tsc_hz: float | None) -> tuple[float | None, float | None]:
    """turbostat's Busy% (fraction here) = MPERF / TSC and Bzy_MHz = TSC_Hz / 1e6 * APERF / MPERF."""
    busy = min(1.0, mperf / tsc) if tsc > 0 else None
    mhz = tsc_hz / 1e6 * aperf / mperf if mperf > 0 and tsc_hz else None
    return busy, mhz
