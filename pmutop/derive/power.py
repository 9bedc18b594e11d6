"""Values of the power fields a Sample carries (pmutop.probes.power), per core and for the all row."""

from __future__ import annotations

from collections.abc import Iterable

from pmutop.core.sample import Sample

# What the live view keeps a history of (and the heatmap can show), with the formula of each.
FORMULAS: dict[str, str] = {
    "busy": "100 × ΔMPERF / ΔTSC (turbostat Busy%)",
    "bzy_mhz": "TSC Hz / 1e6 × ΔAPERF / ΔMPERF (turbostat Bzy_MHz)",
    "temp_c": "TjMax − IA32_THERM_STATUS readout (or hwmon)",
    "pkg_watts": "Δ package energy / interval (RAPL or powercap)",
}
SERIES = tuple(FORMULAS)


def power_values(s: Sample) -> dict[str, float | None]:
    """busy, bzy_mhz, temp_c and (on the package's first CPU) pkg_watts of one sample; None: not measured."""
    j = s.energy_j.get("package")
    return {
        "busy": s.busy,
        "bzy_mhz": s.bzy_mhz,
        "temp_c": s.temp_c,
        "pkg_watts": j / s.interval if j is not None and s.interval > 0 else None,
    }


def combined_power(samples: Iterable[Sample]) -> dict[str, float | None]:
    """The all row: mean Busy% and Bzy MHz, the hottest core, and the packages' watts added up."""
    busy: list[float] = []
    mhz: list[float] = []
    temps: list[float] = []
    watts: list[float] = []
    for s in samples:
        if s.error or s.suspect:
            continue
        # power_values(s), without the dict (the live view asks for 256 cores every interval).
        if s.busy is not None:
            busy.append(s.busy)
        if s.bzy_mhz is not None:
            mhz.append(s.bzy_mhz)
        if s.temp_c is not None:
            temps.append(s.temp_c)
        j = s.energy_j.get("package")
        if j is not None and s.interval > 0:
            watts.append(j / s.interval)
    return {
        "busy": sum(busy) / len(busy) if busy else None,
        "bzy_mhz": sum(mhz) / len(mhz) if mhz else None,
        "temp_c": max(temps) if temps else None,
        "pkg_watts": sum(watts) if watts else None,
    }
