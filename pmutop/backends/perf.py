"""The perf backend: the kernel's perf_event subsystem programs the PMU; pmutop opens groups per CPU.

Per CPU: the hardware events in one group when they fit the counters (else the fixed-counter events in
one group and the rest in groups of at most the counter budget, which the kernel multiplexes), and the
software events in a group of their own. Each group is read with one read(); values are scaled by
Δenabled/Δrunning like `perf stat -I`, and marked estimates when the group shared the PMU.

Top-down (pmutop.pmu.topdown_plan): where the kernel drives PERF_METRICS, its topdown events (sysfs
events/slots, events/topdown-*) in one group led by slots, published as slot counts per interval under
`slots`, `topdown_retiring`, ...; elsewhere the formula's events (Intel tables, E-core events, AMD pipeline
events) in a group of their own, multiplexed and scaled like the rest.
"""

from __future__ import annotations

import errno
import os

from pmutop.backends.base import Backend, CpuCounters, EventResolver, Reading, resolve_for_cpu
from pmutop.core.clock import Clock
from pmutop.core.cpulist import format_cpu_list
from pmutop.core.errors import HardwareError, PmutopError, UsageError
from pmutop.core.undo import UndoLog
from pmutop.hw import perf_event, shim
from pmutop.hw.platform import NMI_WATCHDOG, HostPlatform
from pmutop.pmu import topdown_plan
from pmutop.pmu.cpuid_decode import decode_core_type, decode_identity, decode_perfmon
from pmutop.pmu.events import ARCH_EVENTS, DEFAULT_EVENTS, DEFAULT_SOFTWARE_EVENTS, SOFTWARE_EVENTS, EventSpec
from pmutop.pmu.perfmon import PerfmonTables, Resolver
from pmutop.pmu.topdown_plan import TopdownPlan
from pmutop.probes.cputimes import CpuBusy

U64 = (1 << 64) - 1
FIXED_HW = {0: 1, 1: 0, 2: 9}  # fixed counter -> generic hardware event (instructions, cycles, ref-cycles)
FIXED_LIKE = frozenset((0, 1, 9))  # generic events the kernel puts on fixed counters
MISSING_EVENT = (errno.ENOENT, errno.EOPNOTSUPP)  # the kernel or CPU has no such event


def gp_budget(platform: HostPlatform, cpu: int) -> int:
    """How many general-purpose counters one group may use on this CPU."""
    cpuid = platform.cpuid_fn(cpu)
    pm = decode_perfmon(cpuid)
    if pm.version:
        counters = pm.gp_counters
    elif decode_identity(cpuid).vendor == "AuthenticAMD":
        counters = 6 if cpuid(0x80000001, 0)[2] >> 23 & 1 else 4  # PerfCtrExtCore: 6 core counters
    else:
        counters = 4
    if (platform.read_setting(NMI_WATCHDOG) or "0") != "0":
        counters -= 1  # the watchdog holds one counter; an oversized group would never be scheduled
    return max(counters, 1)


def encode_for_perf(spec: EventSpec, pmu: perf_event.PmuInfo | None, cpu: int) -> perf_event.EventSpec:
    """(name, type, config, config1) the kernel needs for one of our events on this CPU."""
    hybrid = pmu is not None and pmu.name != "cpu"
    hw = (
        spec.hardware
        if spec.hardware is not None
        else FIXED_HW.get(-1 if spec.fixed_index is None else spec.fixed_index)
    )
    if spec.software is not None:
        return perf_event.EventSpec(spec.key, perf_event.PERF_TYPE_SOFTWARE, spec.software)
    if hw is not None and (spec.raw is None or spec.hardware is not None):
        config = perf_event.extended_hw_config(pmu.type, hw) if hybrid and pmu is not None else hw
        return perf_event.EventSpec(spec.key, perf_event.PERF_TYPE_HARDWARE, config)
    if spec.raw is None:
        raise UsageError(f"cpu {cpu}: {spec.name} has no encoding perf can use")
    if pmu is None:
        raise HardwareError(f"cpu {cpu}: no core PMU in /sys/bus/event_source/devices for raw event {spec.name}")
    raw = spec.raw
    fields = {"event": raw.event, "umask": raw.umask}
    # AnyThread: only the top-down formula's AnyThreadSpec events (PMU v3-v4, where Linux shows `any`).
    any_thread = int(spec.any_thread)
    for name, value in (("cmask", raw.cmask), ("inv", int(raw.inv)), ("edge", int(raw.edge)), ("any", any_thread)):
        if value:
            fields[name] = value
    try:
        config, config1, config2 = perf_event.encode_with_format(fields, pmu.formats)
    except ValueError as e:
        raise UsageError(f"cpu {cpu}: {spec.name} cannot be encoded for PMU {pmu.name}: {e}") from None
    return perf_event.EventSpec(spec.key, pmu.type, config, config1, config2)


def _group_reading(words: tuple[int, ...]) -> perf_event.GroupReading:
    """A read_words() tuple of a group without ids as the GroupReading scaled_delta takes."""
    return perf_event.GroupReading(words[1], words[2], list(words[3:]))


class PerfCpuCounters(CpuCounters):
    counts_only_keys = True  # read() counts its groups' names only

    def __init__(
        self, cpu: int, groups: list[perf_event.PerfGroup], clock: Clock, busy: CpuBusy | None, use_tsc: bool
    ) -> None:
        self.cpu = cpu
        self._groups = groups
        self._clock = clock
        self._busy = busy
        self._use_tsc = use_tsc
        self._rdtsc = shim.rdtsc_fn() if use_tsc else shim.rdtsc
        self._prev: list[tuple[int, ...]] = []  # each group's last read_words()
        self._prev_tsc = 0
        self._names = [g.names for g in groups]  # read() runs every interval: not rebuilt there

    @property
    def keys(self) -> list[str]:
        return [name for g in self._groups for name in g.names]

    def start(self) -> int:
        for g in self._groups:
            g.enable()
        at = self._clock.now_ns()
        if self._use_tsc:
            self._prev_tsc = self._rdtsc()
        self._prev = [g.read_words() for g in self._groups]
        if self._busy is not None:
            self._busy.busy(self.cpu)
        return at

    def read(self) -> Reading:
        at = self._clock.now_ns()
        tsc = None
        if self._use_tsc:  # for util = ref cycles / TSC and the TSC rate (the TSC is synchronised across
            now = self._rdtsc()  # CPUs, so this is right also when one thread reads every CPU: batch mode)
            tsc, self._prev_tsc = (now - self._prev_tsc) & U64, now
        counts: dict[str, int] = {}
        estimated: dict[str, float] = {}
        current = []
        for g in self._groups:  # a loop, not a comprehension: one function less to run every interval
            current.append(g.read_words())
        for names, prev, cur in zip(self._names, self._prev, current, strict=True):
            if cur[2] - prev[2] == cur[1] - prev[1] > 0:
                # Counted the whole interval (not multiplexed): the plain deltas, what scaling by 1 gives.
                for i, name in enumerate(names, 3):
                    delta = cur[i] - prev[i]
                    if delta < 0:
                        raise ValueError("readings out of order (or the group was reset between them)")
                    counts[name] = delta
                continue
            values, fraction = perf_event.scaled_delta(_group_reading(prev), _group_reading(cur))
            for name, value in zip(names, values, strict=True):
                if fraction > 0:
                    counts[name] = round(value)
                if fraction < 1:
                    estimated[name] = round(fraction, 4)  # 0: not counted at all in this interval
        self._prev = current
        util = self._busy.busy(self.cpu) if self._busy is not None else None
        # Positional (at_ns, tsc, counts, overflows, suspect, estimated, util): a little less every interval.
        return Reading(at, tsc, counts, {}, None, estimated, util)

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
        topdown: bool | None = None,
        tables: PerfmonTables | None = None,
        cpu_wide_problem: str | None = None,
    ) -> None:
        """`cpu_wide_problem`: why no CPU-wide event opens here: then no CPU counters at all, the CPU table's
        utilisation from the kernel's per-CPU times (a run that counts processes goes on with those).
        `topdown`: None = measure top-down where it costs no general-purpose counters (PERF_METRICS),
        True = also where its events take counters (they are multiplexed with the rest), False = never.
        `tables`: Intel's perfmon tables for the formula methods (default: those of `resolver`, else the
        download cache or $PMUTOP_PERFMON_DIR)."""
        super().__init__(platform, clock, events, user=user, kernel=kernel, resolver=resolver)
        self.platform: HostPlatform = platform  # perf counts this host's CPUs only
        self.software_only = software_only
        self.hardware_problem = hardware_problem  # why hardware events are unavailable (software-only mode)
        self.cpu_wide_problem = cpu_wide_problem
        self.read_method = "read()"
        self.topdown = topdown
        self._tables = tables
        self._tables_looked_up = tables is not None
        self._counters: dict[int, PerfCpuCounters] = {}
        self._topdown_plans: dict[int, TopdownPlan] = {}  # cpu -> the plan (also when not measured)
        self._topdown_groups: dict[int, list[perf_event.EventSpec]] = {}  # cpu -> its top-down group, before opening
        self._topdown_methods: dict[int, str] = {}  # cpu -> method whose group is open
        self._topdown_notes: dict[str, list[int]] = {}  # message -> cpus, told once after prepare
        self._pmu_events: dict[str, dict[str, str]] = {}  # PMU name -> its sysfs events/, read once

    # --- top-down ------------------------------------------------------------------------------------

    def topdown_method(self, cpu: int) -> str | None:
        """The top-down method measured on `cpu` (pmutop.derive.topdown's names), or None."""
        return self._topdown_methods.get(cpu)

    def topdown_plan(self, cpu: int) -> TopdownPlan | None:
        """What top-down on `cpu` would take, or why not (None before prepare, or with topdown=False)."""
        return self._topdown_plans.get(cpu)

    def _perfmon_tables(self) -> PerfmonTables | None:
        if not self._tables_looked_up:
            self._tables_looked_up = True
            owner = getattr(self.resolver, "__self__", None)  # a bound Resolver.resolve
            if isinstance(owner, Resolver):
                self._tables = owner.tables
            else:
                try:
                    self._tables = PerfmonTables.locate(None)
                except UsageError:  # $PMUTOP_PERFMON_DIR without a mapfile: no tables for top-down
                    self._tables = None
        return self._tables

    def _plan_topdown(self, cpu: int, pmu: perf_event.PmuInfo | None) -> TopdownPlan:
        cpuid = self.platform.cpuid_fn(cpu)
        smt = topdown_plan.smt_from_sysfs(self.platform.read_setting, cpu)
        if smt is None:
            smt = topdown_plan.smt_from_cpuid(cpuid)
        if pmu is None:
            return topdown_plan.unavailable("no core PMU in /sys/bus/event_source/devices for this CPU")
        return topdown_plan.plan_topdown(
            decode_identity(cpuid),
            decode_core_type(cpuid),
            decode_perfmon(cpuid),
            perf_capabilities=None,  # not readable through perf; the kernel's event list tells instead
            smt=smt,
            tables=self._perfmon_tables(),
            backend="perf",
            perf_events=self._listed_events(pmu).keys(),
            any_thread_format="any" in pmu.formats,
        )

    def _listed_events(self, pmu: perf_event.PmuInfo) -> dict[str, str]:
        if pmu.name not in self._pmu_events:
            self._pmu_events[pmu.name] = perf_event.pmu_events(self.platform.sysroot, pmu.name)
        return self._pmu_events[pmu.name]

    def _topdown_note(self, message: str, cpu: int) -> None:
        cpus = self._topdown_notes.setdefault(message, [])
        if cpu not in cpus:
            cpus.append(cpu)

    def _topdown_specs(self, cpu: int, pmu: perf_event.PmuInfo | None, counted: set[str]) -> list[perf_event.EventSpec]:
        """The top-down group of this CPU (empty when it is not measured); `counted`: keys already counted."""
        if self.topdown is False or self.software_only:
            return []
        plan = self._plan_topdown(cpu, pmu)
        self._topdown_plans[cpu] = plan
        if not plan.enabled(self.topdown):
            self.topdown_off = self.topdown_off or plan.off_unless_asked(self.topdown)
            if self.topdown and not plan.available:
                self._topdown_note(f"top-down not measured: {plan.detail.removeprefix('unavailable: ')}", cpu)
            return []
        assert pmu is not None  # an available plan has a PMU
        try:
            if plan.method == topdown_plan.PERF_METRICS:
                # The kernel's own encodings from sysfs, slots first: it must lead the group (perf topdown.txt).
                names = (
                    topdown_plan.PERF_SLOTS_EVENT,
                    *topdown_plan.PERF_TOPDOWN_L1,
                    *(topdown_plan.PERF_TOPDOWN_L2 if plan.level2 else ()),
                )
                listed = self._listed_events(pmu)
                specs = []
                for name in names:
                    config, config1, config2 = perf_event.encode_with_format(
                        perf_event.parse_event_terms(listed[name]), pmu.formats
                    )
                    specs.append(perf_event.EventSpec(name.replace("-", "_"), pmu.type, config, config1, config2))
            else:
                specs = [encode_for_perf(e, pmu, cpu) for e in plan.events if e.key not in counted]
        except (KeyError, ValueError, PmutopError) as e:
            self._topdown_note(f"top-down not measured: cannot encode its events for PMU {pmu.name}: {e}", cpu)
            return []
        if plan.costs_counters:
            self._topdown_note(
                f"top-down: {plan.detail}; its events take {plan.gp_counters} general-purpose counters "
                "(multiplexed with the others: estimates)",
                cpu,
            )
        if not specs:  # every event it needs is counted already (asked for with --events)
            self._topdown_methods[cpu] = plan.method or ""
            return []
        self._topdown_groups[cpu] = specs
        return specs

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

    def _group_specs(self, cpu: int, pmus: dict[str, perf_event.PmuInfo]) -> list[list[perf_event.EventSpec]]:
        pmu = perf_event.core_pmu_for_cpu(pmus, cpu)
        encoded = [(e, encode_for_perf(e, pmu, cpu)) for e in self._events_for(cpu)]
        software = [pe for e, pe in encoded if e.software is not None]
        hardware = [(e, pe) for e, pe in encoded if e.software is None]
        fixed_like = [
            pe for e, pe in hardware if pe.type == perf_event.PERF_TYPE_HARDWARE and pe.config & 0xFF in FIXED_LIKE
        ]
        general = [pe for e, pe in hardware if pe not in fixed_like]
        budget = gp_budget(self.platform, cpu)
        groups: list[list[perf_event.EventSpec]] = []
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
        topdown = self._topdown_specs(cpu, pmu, {pe.name for _, pe in encoded}) if hardware else []
        if topdown:
            groups.append(topdown)  # always a group of its own: its ratios need its events counted together
        if software:
            groups.append(software)
        return groups

    def prepare(self, cpus: list[int], undo: UndoLog) -> None:
        if not self.platform.sysroot.is_host:
            raise UsageError("--backend perf counts this host's CPUs; it cannot be combined with --sysroot")
        use_tsc = shim.available()
        if self.cpu_wide_problem is not None:
            self._prepare_without_counters(cpus, undo, use_tsc)
            return
        pmus = perf_event.list_pmus(self.platform.sysroot)
        busy = CpuBusy(self.platform.online_cpus()) if self.software_only else None
        opened: list[perf_event.PerfGroup] = []

        def close_all() -> None:
            for g in opened:
                g.close()
            if busy is not None:
                busy.close()

        undo.push("perf events", close_all)
        explicit = {e.key for e in self.events or []}
        for cpu in cpus:
            groups = []
            for specs in self._group_specs(cpu, pmus):
                if specs is self._topdown_groups.get(cpu):
                    group = self._open_topdown_group(cpu, specs)
                else:
                    group = self._open_group(cpu, specs, explicit)
                if group is not None:
                    opened.append(group)
                    groups.append(group)
            if not groups:
                raise HardwareError(f"cpu {cpu}: none of the events could be opened")
            self._counters[cpu] = PerfCpuCounters(cpu, groups, self.clock, busy, use_tsc)
            self._counters[cpu].topdown_method = self._topdown_methods.get(cpu)
        for message, note_cpus in self._topdown_notes.items():
            self.notices.append(f"{message} (cpu {format_cpu_list(sorted(note_cpus))})")
        if self.software_only:
            self.notices.append(
                f"hardware events unavailable ({self.hardware_problem}): IPC and cache columns are unavailable; "
                "counting kernel software events, utilisation from the kernel's per-CPU times"
            )

    def _prepare_without_counters(self, cpus: list[int], undo: UndoLog, use_tsc: bool) -> None:
        """No CPU-wide counter opens: each CPU's utilisation from the kernel's per-CPU times, nothing else."""
        busy = CpuBusy(self.platform.online_cpus())
        undo.push("perf events", busy.close)
        for cpu in cpus:
            self._counters[cpu] = PerfCpuCounters(cpu, [], self.clock, busy, use_tsc)
        self.notices.append(
            f"CPU-wide counters unavailable: {self.cpu_wide_problem}; the CPU table shows utilisation from the "
            "kernel's per-CPU times only"
        )

    def _open_group(
        self, cpu: int, specs: list[perf_event.EventSpec], explicit: set[str]
    ) -> perf_event.PerfGroup | None:
        """Open one group; default events this kernel or CPU lacks (e.g. ref-cycles on AMD) are left out
        with a notice, an explicitly requested one is an error (its one-line explanation)."""
        kw = {"exclude_user": not self.user, "exclude_kernel": not self.kernel}
        try:
            return perf_event.PerfGroup(cpu, specs, **kw)
        except perf_event.PerfOpenError as e:
            if e.errno not in MISSING_EVENT:
                raise
        keep = []
        for spec in specs:  # find the members this CPU cannot count
            try:
                perf_event.PerfGroup(cpu, [spec], **kw).close()
                keep.append(spec)
            except perf_event.PerfOpenError as e:
                if spec.name in explicit or e.errno not in MISSING_EVENT:
                    raise
                self._dropped(cpu, spec.name, str(e))
        return perf_event.PerfGroup(cpu, keep, **kw) if keep else None

    def _open_topdown_group(self, cpu: int, specs: list[perf_event.EventSpec]) -> perf_event.PerfGroup | None:
        """All or nothing: a partial top-down group means nothing. A failure is a notice, not an error."""
        try:
            group = perf_event.PerfGroup(cpu, specs, exclude_user=not self.user, exclude_kernel=not self.kernel)
        except perf_event.PerfOpenError as e:
            self._topdown_note(f"top-down not measured: {e}", cpu)
            return None
        plan = self._topdown_plans[cpu]
        assert plan.method is not None
        self._topdown_methods[cpu] = plan.method
        return group

    def _dropped(self, cpu: int, name: str, why: str) -> None:
        note = f"not counting {name}: {why}"
        if note not in self.notices:
            self.notices.append(note)

    def counters(self, cpu: int) -> PerfCpuCounters:
        return self._counters[cpu]

    def describe(self) -> dict[str, object]:
        if self.cpu_wide_problem is not None:
            kind = "per-task counters only"
        else:
            kind = "software events" if self.software_only else "hardware events"
        return {"backend": self.name, "read_method": self.read_method, "pmu": f"perf_event ({kind})"}


def probe_hardware_events(cpu: int) -> str | None:
    """None when a CPU-wide hardware cycles event opens on `cpu`; else the one-line reason it does not."""
    try:
        group = perf_event.PerfGroup(
            cpu, [perf_event.EventSpec("cycles", perf_event.PERF_TYPE_HARDWARE, perf_event.PERF_COUNT_HW_CPU_CYCLES)]
        )
    except HardwareError as e:
        return str(e)
    group.close()
    return None


def probe_task_events() -> bool:
    """Whether this process may count itself (task-clock, user space only: what perf_event_paranoid 2 allows
    any user on their own processes)."""
    attr = perf_event.make_attr(
        perf_event.PERF_TYPE_SOFTWARE,
        perf_event.PERF_COUNT_SW_TASK_CLOCK,
        read_format=0,
        exclude_kernel=True,
    )
    try:
        fd = perf_event.perf_event_open(attr, 0, -1, -1)
    except HardwareError:
        return False
    os.close(fd)
    return True


def probe_software_events(cpu: int) -> str | None:
    try:
        group = perf_event.PerfGroup(
            cpu,
            [
                perf_event.EventSpec(
                    "context-switches", perf_event.PERF_TYPE_SOFTWARE, perf_event.PERF_COUNT_SW_CONTEXT_SWITCHES
                )
            ],
        )
    except HardwareError as e:
        return str(e)
    group.close()
    return None
