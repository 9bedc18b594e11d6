"""Uncore PMU instances from sysfs: which PMU, on which CPU to open it, and which package that counts.

An uncore PMU's `cpumask` names one CPU per package it covers (Linux uncore.c: "Place all uncore events for a
particular physical package onto a single cpu"): Intel's uncore_imc_0 lists one CPU per socket, and counts
the socket of the CPU it is opened on; AMD registers one amd_umc_N per memory controller, each with the one
CPU of its socket. So an instance is a (PMU, CPU of its cpumask) pair, and its package is that CPU's
topology/physical_package_id.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pmutop.core.sysroot import Sysroot
from pmutop.hw.perf_event.sysfs import EVENT_SOURCE_DIR, FormatField, list_pmus, parse_event_terms, pmu_events

CPU_DIR = "sys/devices/system/cpu"


@dataclass(frozen=True)
class UncoreInstance:
    """One uncore PMU as counted on one CPU of its cpumask."""

    pmu: str
    type: int  # perf_event_attr.type (the PMU's sysfs `type`)
    cpu: int
    package: int | None  # None when the CPU's topology is not readable
    index: int  # the number in the PMU's name (uncore_imc_3 -> 3), 0 without one; orders channels
    formats: dict[str, FormatField]


def package_of_cpu(sysroot: Sysroot, cpu: int) -> int | None:
    text = sysroot.read_text(f"{CPU_DIR}/cpu{cpu}/topology/physical_package_id")
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def uncore_instances(sysroot: Sysroot, pattern: re.Pattern[str]) -> list[UncoreInstance]:
    """Every (PMU, cpumask CPU) whose PMU name matches `pattern`, ordered by package, then PMU number.

    A PMU without `cpumask` is left out: an uncore event must be opened on the CPU the kernel names."""
    found: list[UncoreInstance] = []
    for name, info in list_pmus(sysroot).items():
        m = pattern.match(name)
        if m is None or not info.cpumask:
            continue
        index = int(m.group(1)) if m.groups() and m.group(1) is not None else 0
        for cpu in info.cpumask:
            found.append(UncoreInstance(name, info.type, cpu, package_of_cpu(sysroot, cpu), index, info.formats))
    found.sort(key=lambda u: (u.package if u.package is not None else -1, u.index, u.pmu, u.cpu))
    return found


def event_terms(sysroot: Sysroot, pmu: str) -> dict[str, dict[str, int]]:
    """The PMU's named sysfs events as terms ({"cas_count_read": {"event": 4, "umask": 3}}); unparsable ones
    are left out."""
    out: dict[str, dict[str, int]] = {}
    for name, text in pmu_events(sysroot, pmu).items():
        try:
            out[name] = parse_event_terms(text)
        except ValueError:
            continue
    return out


def event_scale(sysroot: Sysroot, pmu: str, event: str) -> tuple[float | None, str | None]:
    """The sysfs `.scale` and `.unit` of one event (perf multiplies counts by the scale to show the unit).

    Read for `info` only: a count is one cache line, and pmutop multiplies by 64 itself."""
    base = f"{EVENT_SOURCE_DIR}/{pmu}/events/{event}"
    text = sysroot.read_text(f"{base}.scale")
    try:
        scale = float(text) if text is not None else None
    except ValueError:
        scale = None
    return scale, sysroot.read_text(f"{base}.unit")
