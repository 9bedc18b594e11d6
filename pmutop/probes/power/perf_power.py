"""The kernel's perf PMUs for the same facts without MSR access (turbostat uses them too):
`msr` (aperf, mperf, tsc; arch/x86/events/msr.c), `cstate_core` (c1/c3/c6/c7-residency, counting at the TSC
rate; arch/x86/events/intel/cstate.c) and `power` (energy-pkg/cores/ram with `.scale` in joules;
arch/x86/events/rapl.c). Events come from sysfs (type, format, events/<name>, <name>.scale); each PMU is one
perf group per CPU (a group cannot span PMUs). System-wide events need root, CAP_PERFMON or
perf_event_paranoid <= 0: a refused open is reported, not hidden.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pmutop.core.errors import PmutopError
from pmutop.core.sysroot import Sysroot
from pmutop.hw.perf_event import (
    EVENT_SOURCE_DIR,
    EventSpec,
    PerfGroup,
    encode_with_format,
    list_pmus,
    parse_event_terms,
    pmu_events,
)

CORE_PMUS = {
    "msr": ("aperf", "mperf", "tsc"),
    "cstate_core": ("c1-residency", "c3-residency", "c6-residency", "c7-residency"),
}
PKG_PMUS = {"power": ("energy-pkg", "energy-cores", "energy-ram")}
ENERGY_DOMAIN = {"energy-pkg": "package", "energy-cores": "core", "energy-ram": "dram"}

OpenGroup = Callable[[int, Sequence[EventSpec]], PerfGroup]


@dataclass
class _Pmu:
    name: str
    events: list[EventSpec]
    scales: dict[str, float]


def _open(cpu: int, events: Sequence[EventSpec]) -> PerfGroup:
    group = PerfGroup(cpu, events)
    group.enable()
    return group


class PerfPower:
    """What the msr, cstate_core and power PMUs offer here, and per-CPU groups reading them."""

    name = "perf"

    def __init__(self, sysroot: Sysroot, open_group: OpenGroup = _open) -> None:
        self.sysroot = sysroot
        self._open_group = open_group
        self.pmus: dict[str, _Pmu] = {}
        self.why: dict[str, str] = {}  # pmu -> why it is missing or refused
        infos = list_pmus(sysroot)
        for name, wanted in (*CORE_PMUS.items(), *PKG_PMUS.items()):
            info = infos.get(name)
            if info is None:
                self.why[name] = "not offered by this kernel (or this CPU)"
                continue
            listed = pmu_events(sysroot, name)
            events, scales = [], {}
            for ev in wanted:
                if ev not in listed:
                    continue
                try:
                    config, c1, c2 = encode_with_format(parse_event_terms(listed[ev]), info.formats)
                except ValueError:
                    continue
                events.append(EventSpec(ev, info.type, config, c1, c2))
                scale = sysroot.read_text(f"{EVENT_SOURCE_DIR}/{name}/events/{ev}.scale")
                try:
                    scales[ev] = float(scale) if scale else 1.0
                except ValueError:
                    scales[ev] = 1.0
            if name == "msr" and not {"aperf", "mperf"} <= {e.name for e in events}:
                self.why[name] = f"events {', '.join(listed) or 'none'}: no aperf/mperf (a VM hides them)"
                continue
            if not events:
                self.why[name] = f"none of {', '.join(wanted)} listed"
                continue
            self.pmus[name] = _Pmu(name, events, scales)

    def open(self, cpu: int, first_of_package: bool) -> dict[str, PerfGroup]:
        """This CPU's groups (package PMUs only on the package's first CPU); refusals are remembered for
        `pmutop info` and that PMU is left out."""
        groups = {}
        for name, pmu in self.pmus.items():
            if name in PKG_PMUS and not first_of_package:
                continue
            try:
                groups[name] = self._open_group(cpu, pmu.events)
            except (PmutopError, OSError) as e:
                self.why[name] = str(e)
        return groups

    def read(self, groups: dict[str, PerfGroup]) -> dict[str, float]:
        """event -> scaled cumulative value (joules for energy, ticks for the rest)."""
        out: dict[str, float] = {}
        for name, group in groups.items():
            pmu = self.pmus[name]
            try:
                values = group.read().values
            except (PmutopError, OSError):
                continue
            for ev, v in zip(pmu.events, values, strict=True):
                out[ev.name] = v * pmu.scales.get(ev.name, 1.0)
        return out

    def status(self) -> list[tuple[str, bool, str]]:
        out = []
        for name in (*CORE_PMUS, *PKG_PMUS):
            if name in self.pmus and name not in self.why:
                out.append((name, True, "events " + ", ".join(e.name for e in self.pmus[name].events)))
            else:
                out.append((name, False, self.why.get(name, "not offered")))
        return out
