"""The perf backend: the kernel's perf_event subsystem programs the PMU; pmutop opens groups per CPU.

Per CPU: the hardware events in one group when they fit the counters (else the fixed-counter events in
one group and the rest in groups of at most the counter budget, which the kernel multiplexes), and the
software events in a group of their own. Each group is read with one read(); values are scaled by
Δenabled/Δrunning like `perf stat -I`, and marked estimates when the group shared the PMU.
"""

from __future__ import annotations

import errno

from pmutop.backends.base import Backend, CpuCounters, EventResolver, Reading, resolve_for_cpu
from pmutop.clock import Clock
from pmutop.errors import HardwareError, UsageError
from pmutop.hw import perf_event as P
from pmutop.hw import shim
from pmutop.hw.platform import NMI_WATCHDOG, HostPlatform
from pmutop.pmu.cpuid_decode import decode_identity, decode_perfmon
from pmutop.pmu.events import ARCH_EVENTS, DEFAULT_EVENTS, DEFAULT_SOFTWARE_EVENTS, SOFTWARE_EVENTS, EventSpec
from pmutop.restore import UndoLog
from pmutop.sources.cputimes import CpuBusy

U64 = (1 << 64) - 1
FIXED_HW = {0: 1, 1: 0, 2: 9}  # fixed counter -> generic hardware event (instructions, cycles, ref-cycles)
FIXED_LIKE = frozenset((0, 1, 9))  # generic events the kernel puts on fixed counters
MISSING_EVENT = (errno.ENOENT, errno.EOPNOTSUPP)  # the kernel or CPU has no such event


def gp_budget(platform: HostPlatform, cpu: int) -> int:
    """How many general-purpose counters one group may use on this CPU."""
    cpuid = platform.cpuid_fn(cpu)
    pm = decode_perfmon(cpuid)
    if pm.version:
        n = pm.gp_counters
    elif decode_identity(cpuid).vendor == "AuthenticAMD":
        n = 6 if cpuid(0x80000001, 0)[2] >> 23 & 1 else 4  # PerfCtrExtCore: 6 core counters
    else:
        n = 4
    if (platform.read_setting(NMI_WATCHDOG) or "0") != "0":
        n -= 1  # the watchdog holds one counter; an oversized group would never be scheduled
    return max(n, 1)


def encode_for_perf(spec: EventSpec, pmu: P.PmuInfo | None, cpu: int) -> P.EventSpec:
    """(name, type, config, config1) the kernel needs for one of our events on this CPU."""
    hybrid = pmu is not None and pmu.name != "cpu"
    hw = spec.hardware if spec.hardware is not None else FIXED_HW.get(spec.fixed_index or -1)
    if spec.software is not None:
        return P.EventSpec(spec.key, P.PERF_TYPE_SOFTWARE, spec.software)
    if hw is not None and (spec.raw is None or spec.hardware is not None):
        config = P.extended_hw_config(pmu.type, hw) if hybrid and pmu is not None else hw
        return P.EventSpec(spec.key, P.PERF_TYPE_HARDWARE, config)
    if spec.raw is None:
        raise UsageError(f"cpu {cpu}: {spec.name} has no encoding perf can use")
    if pmu is None:
        raise HardwareError(f"cpu {cpu}: no core PMU in /sys/bus/event_source/devices for raw event {spec.name}")
    raw = spec.raw
    fields = {"event": raw.event, "umask": raw.umask}
    for name, value in (("cmask", raw.cmask), ("inv", int(raw.inv)), ("edge", int(raw.edge))):
        if value:
            fields[name] = value
    try:
        config, config1, config2 = P.encode_with_format(fields, pmu.formats)
    except ValueError as e:
        raise UsageError(f"cpu {cpu}: {spec.name} cannot be encoded for PMU {pmu.name}: {e}") from None
    return P.EventSpec(spec.key, pmu.type, config, config1, config2)


class PerfCpuCounters(CpuCounters):
    def __init__(self, cpu: int, groups: list[P.PerfGroup], clock: Clock, busy: CpuBusy | None, use_tsc: bool) -> None:
        self.cpu = cpu
        self._groups = groups
        self._clock = clock
        self._busy = busy
        self._use_tsc = use_tsc
        self._prev: list[P.GroupReading] = []
        self._prev_tsc = 0

    @property
    def keys(self) -> list[str]:
        return [name for g in self._groups for name in g.names]

    def start(self) -> int:
        for g in self._groups:
            g.enable()
        at = self._clock.now_ns()
        if self._use_tsc:
            self._prev_tsc = shim.rdtsc()
        self._prev = [g.read() for g in self._groups]
        if self._busy is not None:
            self._busy.busy(self.cpu)
        return at

    def read(self) -> Reading:
        at = self._clock.now_ns()
        tsc = None
        if self._use_tsc:  # the TSC of this (pinned) CPU, for util = ref cycles / TSC and the TSC rate
            now = shim.rdtsc()
            tsc, self._prev_tsc = (now - self._prev_tsc) & U64, now
        counts: dict[str, int] = {}
        estimated: dict[str, float] = {}
        current = [g.read() for g in self._groups]
        for g, prev, cur in zip(self._groups, self._prev, current, strict=True):
            values, fraction = P.scaled_delta(prev, cur)
            for name, value in zip(g.names, values, strict=True):
                if fraction > 0:
                    counts[name] = round(value)
                if fraction < 1:
                    estimated[name] = round(fraction, 4)  # 0: not counted at all in this interval
        self._prev = current
        util = self._busy.busy(self.cpu) if self._busy is not None else None
        return Reading(at_ns=at, tsc=tsc, counts=counts, estimated=estimated, util=util)

    def close(self) -> None:
        for g in self._groups:
            g.close()


class PerfBackend(Backend):
    """Counting through perf_event_open on this host's CPUs (pid = -1, cpu = N)."""

    name = "perf"

    def __init__(
        self,
        platform: HostPlatform,
        clock: Clock,
        events: list[EventSpec] | None = None,
        *,
        user: bool = True,
        kernel: bool = True,
        resolver: EventResolver | None = None,
        software_only: bool = False,
        hardware_problem: str | None = None,
    ) -> None:
        super().__init__(platform, clock, events, user=user, kernel=kernel, resolver=resolver)
        self.platform: HostPlatform = platform  # perf counts this host's CPUs only
        self.software_only = software_only
        self.hardware_problem = hardware_problem  # why hardware events are unavailable (software-only mode)
        self.read_method = "read()"
        self._counters: dict[int, PerfCpuCounters] = {}

    def _events_for(self, cpu: int) -> list[EventSpec]:
        if self.events is None:
            names = DEFAULT_SOFTWARE_EVENTS if self.software_only else DEFAULT_EVENTS
            return [ARCH_EVENTS.get(n) or SOFTWARE_EVENTS[n] for n in names]
        events = resolve_for_cpu(self.platform, cpu, self.events, self.resolver) or []
        if self.software_only:
            hw = [e.name for e in events if e.software is None]
            if hw:
                raise HardwareError(
                    f"cannot count {', '.join(hw)}: hardware events are unavailable here ({self.hardware_problem})"
                )
            return events
        keys = {e.key for e in events}
        fixed = [ARCH_EVENTS[n] for n in ("instructions", "cycles", "ref-cycles") if ARCH_EVENTS[n].key not in keys]
        return fixed + events

    def _group_specs(self, cpu: int, pmus: dict[str, P.PmuInfo]) -> list[list[P.EventSpec]]:
        pmu = P.core_pmu_for_cpu(pmus, cpu)
        encoded = [(e, encode_for_perf(e, pmu, cpu)) for e in self._events_for(cpu)]
        software = [pe for e, pe in encoded if e.software is not None]
        hardware = [(e, pe) for e, pe in encoded if e.software is None]
        fixed_like = [pe for e, pe in hardware if pe.type == P.PERF_TYPE_HARDWARE and pe.config & 0xFF in FIXED_LIKE]
        general = [pe for e, pe in hardware if pe not in fixed_like]
        budget = gp_budget(self.platform, cpu)
        groups: list[list[P.EventSpec]] = []
        if len(general) <= budget:
            if hardware:
                groups.append(fixed_like + general)
        else:  # more events than counters: the kernel rotates these groups (multiplexing)
            if fixed_like:
                groups.append(fixed_like)
            groups += [general[i : i + budget] for i in range(0, len(general), budget)]
            self.notices.append(
                f"cpu {cpu}: {len(general)} events for {budget} counters: the kernel multiplexes them (estimates)"
            )
        if software:
            groups.append(software)
        return groups

    def prepare(self, cpus: list[int], undo: UndoLog) -> None:
        if not self.platform.sysroot.is_host:
            raise UsageError("--backend perf counts this host's CPUs; it cannot be combined with --sysroot")
        pmus = P.list_pmus(self.platform.sysroot)
        use_tsc = shim.available()
        busy = CpuBusy(self.platform.online_cpus()) if self.software_only else None
        opened: list[P.PerfGroup] = []

        def close_all() -> list[str]:
            for g in opened:
                g.close()
            return []

        undo.push("perf events", close_all)
        explicit = {e.key for e in self.events or []}
        for cpu in cpus:
            groups = []
            for specs in self._group_specs(cpu, pmus):
                group = self._open_group(cpu, specs, explicit)
                if group is not None:
                    opened.append(group)
                    groups.append(group)
            if not groups:
                raise HardwareError(f"cpu {cpu}: none of the events could be opened")
            self._counters[cpu] = PerfCpuCounters(cpu, groups, self.clock, busy, use_tsc)
        if self.software_only:
            self.notices.append(
                f"hardware events unavailable ({self.hardware_problem}): IPC and cache columns are unavailable; "
                "counting kernel software events, utilisation from the kernel's per-CPU times"
            )

    def _open_group(self, cpu: int, specs: list[P.EventSpec], explicit: set[str]) -> P.PerfGroup | None:
        """Open one group; default events this kernel or CPU lacks (e.g. ref-cycles on AMD) are left out
        with a notice, an explicitly requested one is an error (its one-line explanation)."""
        kw = {"exclude_user": not self.user, "exclude_kernel": not self.kernel}
        try:
            return P.PerfGroup(cpu, specs, **kw)
        except P.PerfOpenError as e:
            if e.errno not in MISSING_EVENT:
                raise
        keep = []
        for spec in specs:  # find the members this CPU cannot count
            try:
                P.PerfGroup(cpu, [spec], **kw).close()
                keep.append(spec)
            except P.PerfOpenError as e:
                if spec.name in explicit or e.errno not in MISSING_EVENT:
                    raise
                self._dropped(cpu, spec.name, str(e))
        return P.PerfGroup(cpu, keep, **kw) if keep else None

    def _dropped(self, cpu: int, name: str, why: str) -> None:
        note = f"not counting {name}: {why}"
        if note not in self.notices:
            self.notices.append(note)

    def counters(self, cpu: int) -> PerfCpuCounters:
        return self._counters[cpu]

    def describe(self) -> dict[str, object]:
        kind = "software events" if self.software_only else "hardware events"
        return {"backend": self.name, "read_method": self.read_method, "pmu": f"perf_event ({kind})"}


def probe_hardware_events(cpu: int) -> str | None:
    """None when a CPU-wide hardware cycles event opens on `cpu`; else the one-line reason it does not."""
    try:
        group = P.PerfGroup(cpu, [P.EventSpec("cycles", P.PERF_TYPE_HARDWARE, P.PERF_COUNT_HW_CPU_CYCLES)])
    except HardwareError as e:
        return str(e)
    group.close()
    return None


def probe_software_events(cpu: int) -> str | None:
    try:
        group = P.PerfGroup(
            cpu, [P.EventSpec("context-switches", P.PERF_TYPE_SOFTWARE, P.PERF_COUNT_SW_CONTEXT_SWITCHES)]
        )
    except HardwareError as e:
        return str(e)
    group.close()
    return None
