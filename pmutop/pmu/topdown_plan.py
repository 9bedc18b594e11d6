"""How top-down analysis (TMA level 1, and level 2 where the hardware has it) is measured on one CPU.

plan_topdown() looks at what one CPU (one hybrid core type) offers and picks a method; the formulas that
turn the counts into fractions live in pmutop.derive.topdown, keyed by the same method names and count keys.

Methods and their sources (see also ../shared/reference/topdown.md):
- perf_metrics: Ice Lake and later big cores. TOPDOWN.SLOTS on fixed counter 3 plus the PERF_METRICS MSR,
  available when IA32_PERF_CAPABILITIES (0x345) bit 15 is set (Linux arch/x86/include/asm/msr-index.h,
  PERF_CAP_METRICS_IDX; Intel PCM). Level 2 (heavy ops, branch mispredicts, fetch latency, memory bound)
  from Golden Cove on: Linux arch/x86/events/intel/core.c sets num_topdown_events = 8 for Sapphire Rapids
  and Alder Lake and later, 4 for Ice Lake / Tiger Lake / Rocket Lake. On the perf backend the kernel's
  topdown events (sysfs events/slots, events/topdown-*) are opened in one group led by slots
  (tools/perf/Documentation/topdown.txt), and the kernel lists only the levels the CPU has.
- slots4 / slots4_smt: Sandy Bridge .. Cascade Lake, the four-event formula of pmu-tools (skl_*_ratios.py):
  UOPS_ISSUED.ANY, UOPS_RETIRED.RETIRE_SLOTS, IDQ_UOPS_NOT_DELIVERED.CORE, INT_MISC.RECOVERY_CYCLES and
  cycles, from the core's built-in table (pmutop.pmu.builtin_events: the encodings differ by generation, Sandy
  Bridge's INT_MISC.RECOVERY_CYCLES is 0x0D/0x03 cmask 1, Skylake's 0x0D/0x01). With SMT on, the core's slots are
  shared: CPU_CLK_UNHALTED.THREAD_ANY and INT_MISC.RECOVERY_CYCLES_ANY count for both threads (AnyThread),
  which only PMU versions 3 and 4 have (CPUID.0AH:EDX[15] marks it deprecated from v5; Linux
  intel_pmu_hw_config refuses it below v3). Linux's own SNB-SKL "topdown-total-slots" event does the same
  (event=0x3c,any=1 with HT on). Without AnyThread the per-thread values are an approximation.
- gracemont / crestmont / skymont: E-cores, TOPDOWN_FE_BOUND.ALL, TOPDOWN_BAD_SPECULATION.ALL,
  TOPDOWN_BE_BOUND.ALL, TOPDOWN_RETIRING.ALL from the E-core's built-in table, over 5 / 6 / 8 slots per cycle
  (Linux perf adl/mtl/lnl-metrics.json). Skymont's first three are fixed counters 4-6 (Intel's table) whose
  general-counter twins (the *.ALL_P events) are what perf opens; Linux (intel_skt_event_constraints) puts
  those encodings on fixed counters 4-6 itself.
- tremont: Tremont (Snow Ridge, Elkhart / Jasper Lake, Lakefield's E-cores), the same four events over 4 slots per
  cycle (Linux perf snowridgex/snr-metrics.json, pmu-tools ehl_ratios.py); Linux lists them as its topdown-*
  events there (core.c tnt_events_attrs).
- goldmont / goldmont_plus: no TOPDOWN_* events; UOPS_ISSUED.ANY, UOPS_RETIRED.ANY, UOPS_NOT_DELIVERED.ANY and
  ISSUE_SLOTS_NOT_CONSUMED.RECOVERY over 3 / 4 slots per cycle, the events Linux names topdown-slots-issued,
  -slots-retired, -fetch-bubbles and -recovery-bubbles there (core.c glm_events_attrs), with perf's formula.
- zen4 / zen5: AMD through perf only, encodings transcribed from Linux tools/perf/pmu-events/arch/x86/
  amdzen4 (other.json, core.json) and amdzen5 (decode.json, execution.json, load-store.json); the formula is
  amdzen4|amdzen5/pipeline.json (6 resp. 8 dispatch slots per ls_not_halted_cyc).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from pmutop.core.cpulist import parse_cpu_list
from pmutop.core.errors import PmutopError, UsageError

# The method names (shared with pmutop.derive.topdown); callers also read them here, e.g. topdown_plan.PERF_METRICS.
from pmutop.core.topdown_methods import (
    CRESTMONT,
    GOLDMONT,
    GOLDMONT_PLUS,
    GRACEMONT,
    PERF_METRICS,
    SKYMONT,
    SLOTS4,
    SLOTS4_SMT,
    TREMONT,
    ZEN4,
    ZEN5,
)
from pmutop.pmu import builtin_events, uarch
from pmutop.pmu.cpuid_decode import CORE_TYPE_CORE, CoreType, CpuIdentity, CpuidFn, PerfmonInfo
from pmutop.pmu.events import ARCH_EVENTS, EventSpec
from pmutop.pmu.perfmon import IntelEvent, PerfmonTables, Resolver, to_spec
from pmutop.pmu.registers import RawEvent

BACKENDS = ("msr", "perf")
PERF_CAP_METRICS = 1 << 15  # IA32_PERF_CAPABILITIES bit 15: PERF_METRICS is available (msr-index.h)
SLOTS_FIXED_COUNTER = 3  # IA32_FIXED_CTR3 counts TOPDOWN.SLOTS

# The kernel's topdown events (sysfs events/ of the core PMU), in PERF_METRICS byte order.
PERF_SLOTS_EVENT = "slots"
PERF_TOPDOWN_L1 = ("topdown-retiring", "topdown-bad-spec", "topdown-fe-bound", "topdown-be-bound")
PERF_TOPDOWN_L2 = ("topdown-heavy-ops", "topdown-br-mispredict", "topdown-fetch-lat", "topdown-mem-bound")

# Slots on fixed counter 3; the metric fields are not counters (PERF_METRICS on msr, perf's metric events).
SLOTS_SPEC = EventSpec("slots", None, fixed_index=SLOTS_FIXED_COUNTER, description="issue slots (TOPDOWN.SLOTS)")

_SLOTS4_EVENTS = ("UOPS_ISSUED.ANY", "UOPS_RETIRED.RETIRE_SLOTS", "IDQ_UOPS_NOT_DELIVERED.CORE")
_RECOVERY = "INT_MISC.RECOVERY_CYCLES"
_RECOVERY_ANY = "INT_MISC.RECOVERY_CYCLES_ANY"
_THREAD_ANY = "CPU_CLK_UNHALTED.THREAD_ANY"  # the key the formula reads
_THREAD_P_ANY = "CPU_CLK_UNHALTED.THREAD_P_ANY"  # its general-counter twin (0x3C, AnyThread)
_ECORE_EVENTS = (
    "TOPDOWN_FE_BOUND.ALL",
    "TOPDOWN_BAD_SPECULATION.ALL",
    "TOPDOWN_BE_BOUND.ALL",
    "TOPDOWN_RETIRING.ALL",
)
_GOLDMONT_EVENTS = (
    "UOPS_ISSUED.ANY",
    "UOPS_RETIRED.ANY",
    "UOPS_NOT_DELIVERED.ANY",
    "ISSUE_SLOTS_NOT_CONSUMED.RECOVERY",
)


def _amd(name: str, event: int, umask: int = 0) -> EventSpec:
    return EventSpec(name, RawEvent(event, umask), description=f"AMD {name} (Linux perf pmu-events)")


# Linux tools/perf/pmu-events/arch/x86/amdzen4/{core,other}.json and amdzen5/{load-store,decode,execution}.json:
# the same encodings on both generations. Event codes above 0xFF use the PMU format's event bits 32-35.
_AMD_EVENTS = (
    _amd("ls_not_halted_cyc", 0x76),
    _amd("de_no_dispatch_per_slot.no_ops_from_frontend", 0x1A0, 0x01),
    _amd("de_no_dispatch_per_slot.backend_stalls", 0x1A0, 0x1E),
    _amd("de_src_op_disp.all", 0xAA, 0x07),
    _amd("ex_ret_ops", 0xC1),
)

# Where the formula methods' encodings come from (TopdownPlan.encodings); the perfmon tables only check them.
ENCODINGS_BUILT_IN = "encodings built into pmutop"


@dataclass(frozen=True)
class TopdownPlan:
    """How one CPU measures top-down, or why it cannot (method None, `detail` says why)."""

    method: str | None
    # What to count besides the fixed trio. perf_metrics: slots (fixed counter 3) only; the metric values
    # come from PERF_METRICS (msr) or the kernel's metric events (perf), published under `keys`.
    events: tuple[EventSpec, ...] = ()
    keys: tuple[str, ...] = ()  # the count keys the method's formula reads, in a fixed order
    gp_counters: int = 0  # general-purpose counters the events take (0: free, on by default)
    level2: bool = False
    detail: str = ""  # one line for `pmutop info`
    approximate: bool = False  # per-thread values on a core whose slots the SMT siblings share
    width: int | None = None  # slots per cycle of the formula (None: the hardware counts slots)
    core: str | None = None  # core microarchitecture, e.g. "Golden Cove"
    # Formula methods on Intel: where the event encodings come from (pmutop.pmu.builtin_events) and what the
    # perfmon tables, when present, say about them; "" where no Intel table could be a question.
    encodings: str = ""

    @property
    def available(self) -> bool:
        return self.method is not None

    @property
    def costs_counters(self) -> bool:
        """True when the events need general-purpose counters (then off unless asked for)."""
        return self.gp_counters > 0

    def enabled(self, wanted: bool | None) -> bool:
        """Whether a run measures it: `wanted` None = where it costs no general counters, True/False = on/off."""
        if not self.available or wanted is False:
            return False
        return wanted is True or not self.costs_counters

    def off_unless_asked(self, wanted: bool | None) -> str | None:
        """What to tell a run that does not measure top-down only because it was not asked to."""
        if wanted is None and self.available and not self.enabled(None):
            n = self.gp_counters
            return f"top-down takes {n} general-purpose counter{'s' if n != 1 else ''} here: run with --topdown"
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "available": self.available,
            "detail": self.detail,
            "level2": self.level2,
            "gp_counters": self.gp_counters,
            "default_on": self.enabled(None),
            "approximate": self.approximate,
            "width": self.width,
            "core": self.core,
            "encodings": self.encodings or None,
            "keys": list(self.keys),
            "events": [_event_text(e) for e in self.events],
        }


def _event_text(e: EventSpec) -> str:
    where = []
    if e.fixed_index is not None:
        where.append(f"fixed {e.fixed_index}")
    if e.raw is not None:
        where.append(
            f"event={e.raw.event:#04x},umask={e.raw.umask:#04x}" + (f",cmask={e.raw.cmask}" if e.raw.cmask else "")
        )
    if e.any_thread:
        where.append("any")
    return f"{e.name} ({', '.join(where)})" if where else e.name


def unavailable(why: str, core: str | None = None) -> TopdownPlan:
    return TopdownPlan(None, detail=f"unavailable: {why}", core=core)


# --- SMT -----------------------------------------------------------------------------------------------


def smt_from_sysfs(read: Callable[[str], str | None], cpu: int) -> bool | None:
    """Whether `cpu` shares its core with an online sibling (sysfs topology/thread_siblings_list), or None
    when the file is absent. Per core, not machine-wide: with the sibling offline (or `nosmt`) the thread
    has the core to itself and per-thread counts are exact."""
    text = read(f"sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list")
    if not text:
        return None
    try:
        return len(parse_cpu_list(text, what="thread_siblings_list")) > 1
    except PmutopError:
        return None


def smt_from_cpuid(cpuid: CpuidFn) -> bool | None:
    """Fallback without sysfs: CPUID.0BH sub-leaf 0 is the SMT level; EBX[15:0] its logical processors."""
    try:
        max_leaf = cpuid(0, 0)[0]
        if max_leaf < 0xB:
            return None
        _, ebx, ecx, _ = cpuid(0xB, 0)
    except OSError:
        return None
    if (ecx >> 8 & 0xFF) != 1:  # level type 1 = SMT
        return None
    return (ebx & 0xFFFF) > 1


# --- the plan ------------------------------------------------------------------------------------------


def _fixed_available(perfmon: PerfmonInfo, core_type: CoreType | None, index: int) -> bool:
    if index < perfmon.registers.max_fixed and perfmon.fixed_mask >> index & 1:
        return True
    # Hybrid P-cores without CPUID 0x23: leaf 0xA reports the subset common to both core types, and Linux
    # adds fixed counter 3 (and 2 GP counters) on P-cores itself (cpuid_decode.HYBRID_PCORE_NOTE).
    return (
        index == SLOTS_FIXED_COUNTER
        and core_type is not None
        and core_type.code == CORE_TYPE_CORE
        and perfmon.leaf23 is None
        and perfmon.version >= 5
    )


def _gp_needed(events: Collection[EventSpec], perfmon: PerfmonInfo, core_type: CoreType | None) -> int:
    """Events that need a general-purpose counter: no fixed counter, or one this CPU does not have."""
    return sum(
        1
        for e in events
        if e.key != "cycles" and (e.fixed_index is None or not _fixed_available(perfmon, core_type, e.fixed_index))
    )


class _Missing(Exception):
    """An event the method needs is not in the built-in table (or cannot be counted as defined)."""


def _table_events(tables: PerfmonTables, identity: CpuIdentity, core_type: CoreType | None) -> dict[str, IntelEvent]:
    code, native = (core_type.code, core_type.native_model_id) if core_type else (None, None)
    return tables.events_for(identity, code, native)


def _spec(
    events: Mapping[str, IntelEvent],
    name: str,
    perfmon: PerfmonInfo,
    *,
    any_thread: bool = False,
    twin: str | None = None,
) -> EventSpec:
    """The table event `name` as an EventSpec named `name` (its key is what the formula reads).

    `twin` is its general-counter twin (Intel names them *_P): used instead when `name` is missing or lives on
    a fixed counter this PMU does not have (a v5 PMU reports fixed counters 0-3 only), and for the encoding
    perf needs when `name` lives only on a fixed counter.
    """
    ev = events.get(name)
    alt = events.get(twin) if twin else None
    if ev is None and alt is None:
        raise _Missing(f"{name} is not among pmutop's built-in top-down events")
    max_fixed = perfmon.registers.max_fixed
    try:
        if ev is None or (alt is not None and ev.fixed_counter is not None and ev.fixed_counter >= max_fixed):
            assert alt is not None
            return dataclasses.replace(to_spec(alt, any_thread=any_thread, max_fixed=max_fixed), name=name)
        spec = to_spec(ev, any_thread=any_thread, max_fixed=max_fixed)
        if spec.raw is None and alt is not None and alt.fixed_counter is None:
            gp = to_spec(alt, any_thread=any_thread, max_fixed=max_fixed)
            spec = dataclasses.replace(spec, raw=gp.raw, counters=gp.counters)
        return spec
    except UsageError as e:
        raise _Missing(str(e).split(";")[0]) from None


def _as_tables(tables: PerfmonTables | Resolver | None) -> PerfmonTables | None:
    return tables.tables if isinstance(tables, Resolver) else tables


def plan_topdown(
    identity: CpuIdentity,
    core_type: CoreType | None,
    perfmon: PerfmonInfo,
    *,
    perf_capabilities: int | None,
    smt: bool | None,
    tables: PerfmonTables | Resolver | None,
    backend: str,
    perf_events: Collection[str] | None = None,
    any_thread_format: bool = True,
) -> TopdownPlan:
    """Decide how this CPU (this hybrid core type) measures top-down on `backend` ("msr" or "perf").

    perf_capabilities: IA32_PERF_CAPABILITIES, or None when it could not be read (the model decides then).
    smt: this CPU shares its core with an online sibling (smt_from_sysfs); None = unknown, taken as off.
    tables: Intel's perfmon tables (or a Resolver over them), None when there are none. The formula methods'
        encodings are built in (pmutop.pmu.builtin_events); the tables only cross-check them.
    perf_events: perf only: the event names the core PMU lists in sysfs events/ (None: not looked at).
    any_thread_format: perf only: the core PMU's sysfs format/ has `any` (Linux shows it on v3-v4 PMUs).
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, not {backend!r}")
    code, native = (core_type.code, core_type.native_model_id) if core_type else (None, None)
    core = uarch.core_uarch(identity.vendor, identity.family, identity.model, code, native)
    if core is None:
        if identity.hybrid and core_type is None and identity.vendor == "GenuineIntel":
            return unavailable("hybrid CPU without a core type (CPUID 0x1A): the core cannot be told")
        what = identity.uarch or f"{identity.vendor} family {identity.family:#x} model {identity.model:#x}"
        return unavailable(f"no top-down method known for {what}")
    if core.topdown is None:
        return unavailable(core.why_not, core.name)
    if core.topdown in (uarch.TD_ZEN4, uarch.TD_ZEN5):
        return _plan_amd(core, backend)
    if core.topdown in (uarch.TD_PERF_METRICS, uarch.TD_PERF_METRICS_L2):
        return _plan_perf_metrics(
            core, core_type, perfmon, perf_capabilities, backend, perf_events, hypervisor=identity.hypervisor
        )
    events = builtin_events.events_for_core(core.name)
    if events is None:
        return unavailable(f"pmutop ships no top-down events for {core.name}", core.name)
    try:
        if core.topdown == uarch.TD_SLOTS4:
            plan = _plan_slots4(core, core_type, perfmon, events, bool(smt), backend, any_thread_format)
        elif core.topdown in (uarch.TD_GOLDMONT, uarch.TD_GOLDMONT_PLUS):
            plan = _plan_goldmont(core, core_type, perfmon, events)
        else:
            plan = _plan_ecore(core, core_type, perfmon, events)
    except _Missing as e:
        return unavailable(str(e), core.name)
    encodings = _cross_check(_as_tables(tables), identity, core_type, events)
    return dataclasses.replace(plan, encodings=encodings, detail=f"{plan.detail}; {encodings}")


def _cross_check(
    tables: PerfmonTables | None, identity: CpuIdentity, core_type: CoreType | None, events: Mapping[str, IntelEvent]
) -> str:
    """Where the plan's encodings come from, checked against the perfmon tables when there are some."""
    if tables is None:
        return ENCODINGS_BUILT_IN
    try:
        table = _table_events(tables, identity, core_type)
    except PmutopError:
        return ENCODINGS_BUILT_IN + " (the perfmon tables cannot be read to check them)"
    if not table:
        return ENCODINGS_BUILT_IN
    differ = builtin_events.differences(events, table)
    if differ:
        return ENCODINGS_BUILT_IN + "; the perfmon table differs: " + "; ".join(differ)
    return ENCODINGS_BUILT_IN + ", the perfmon table agrees"


def _plan_amd(core: uarch.CoreUarch, backend: str) -> TopdownPlan:
    if backend != "perf":
        return unavailable("AMD top-down is counted through perf only (--backend perf)", core.name)
    method = ZEN4 if core.topdown == uarch.TD_ZEN4 else ZEN5
    return TopdownPlan(
        method,
        events=_AMD_EVENTS,
        keys=tuple(e.key for e in _AMD_EVENTS),
        gp_counters=len(_AMD_EVENTS),
        detail=f"pipeline utilisation events ({core.name}, {core.width} wide)",
        width=core.width,
        core=core.name,
    )


def _plan_perf_metrics(
    core: uarch.CoreUarch,
    core_type: CoreType | None,
    perfmon: PerfmonInfo,
    perf_capabilities: int | None,
    backend: str,
    perf_events: Collection[str] | None,
    *,
    hypervisor: bool,
) -> TopdownPlan:
    level2 = core.topdown == uarch.TD_PERF_METRICS_L2
    notes = ""
    if backend == "perf" and perf_events is not None:
        # The kernel lists the topdown events only when it drives PERF_METRICS, and level 2 only where it exists.
        if PERF_SLOTS_EVENT not in perf_events or not all(n in perf_events for n in PERF_TOPDOWN_L1):
            return unavailable(
                "the kernel lists no topdown events for this PMU (Linux drives PERF_METRICS from 5.9 on Ice Lake, "
                "later on newer models" + ("; the hypervisor must expose PERF_METRICS)" if hypervisor else ")"),
                core.name,
            )
        level2 = all(n in perf_events for n in PERF_TOPDOWN_L2)
    else:
        if perf_capabilities is not None and not perf_capabilities & PERF_CAP_METRICS:
            return unavailable(
                "IA32_PERF_CAPABILITIES bit 15 (PERF_METRICS) is clear"
                + (" (the hypervisor does not expose it)" if hypervisor else ""),
                core.name,
            )
        if not _fixed_available(perfmon, core_type, SLOTS_FIXED_COUNTER):
            return unavailable("no fixed counter 3 (TOPDOWN.SLOTS) in CPUID", core.name)
        if backend == "perf" and perf_events is None and perf_capabilities is None:
            notes = " (assumed from the model: the kernel's events were not looked at)"
        elif perf_capabilities is None and backend == "msr":
            notes = " (assumed from the model: PERF_CAPABILITIES not read)"
    levels = "level 1 and 2" if level2 else "level 1"
    what = "perf topdown events" if backend == "perf" else "PERF_METRICS"
    keys = ("slots", *(n.replace("-", "_") for n in PERF_TOPDOWN_L1 + (PERF_TOPDOWN_L2 if level2 else ())))
    return TopdownPlan(
        PERF_METRICS,
        events=(SLOTS_SPEC,),
        keys=keys,
        gp_counters=0,
        level2=level2,
        detail=f"{what}, {levels}{notes}",
        core=core.name,
    )


def _plan_slots4(
    core: uarch.CoreUarch,
    core_type: CoreType | None,
    perfmon: PerfmonInfo,
    events: Mapping[str, IntelEvent],
    smt: bool,
    backend: str,
    any_thread_format: bool,
) -> TopdownPlan:
    common = [_spec(events, name, perfmon) for name in _SLOTS4_EVENTS]
    any_thread = 3 <= perfmon.version <= 4 and not perfmon.anythread_deprecated
    if backend == "perf":
        any_thread = any_thread and any_thread_format
    if smt and any_thread:
        # Per physical core: both threads' clocks and recovery cycles (the formula halves them). THREAD_ANY is
        # counted with its general-counter encoding so that it never shares fixed counter 1 with `cycles`.
        specs = [
            *common,
            _spec(events, _RECOVERY_ANY, perfmon, any_thread=True),
            _spec(events, _THREAD_P_ANY, perfmon, any_thread=True),
        ]
        specs[-1] = dataclasses.replace(specs[-1], name=_THREAD_ANY)
        return TopdownPlan(
            SLOTS4_SMT,
            events=tuple(specs),
            keys=tuple(e.key for e in specs),
            gp_counters=_gp_needed(specs, perfmon, core_type),
            detail="four-event formula, per physical core (AnyThread)",
            width=core.width,
            core=core.name,
        )
    specs = [*common, _spec(events, _RECOVERY, perfmon), ARCH_EVENTS["cycles"]]
    if smt:
        why = (
            "PMU v5+ has no AnyThread"
            if perfmon.version >= 5 or perfmon.anythread_deprecated
            else "the kernel offers no AnyThread (no `any` format)"
            if 3 <= perfmon.version <= 4
            else f"PMU v{perfmon.version} has no AnyThread"
        )
        detail = f"four-event formula, per thread (approximation: SMT on and {why})"
    else:
        detail = "four-event formula"
    return TopdownPlan(
        SLOTS4,
        events=tuple(specs),
        keys=tuple(e.key for e in specs),
        gp_counters=_gp_needed(specs, perfmon, core_type),
        detail=detail,
        approximate=smt,
        width=core.width,
        core=core.name,
    )


def _plan_ecore(
    core: uarch.CoreUarch, core_type: CoreType | None, perfmon: PerfmonInfo, events: Mapping[str, IntelEvent]
) -> TopdownPlan:
    method = {
        uarch.TD_GRACEMONT: GRACEMONT,
        uarch.TD_CRESTMONT: CRESTMONT,
        uarch.TD_SKYMONT: SKYMONT,
        uarch.TD_TREMONT: TREMONT,
    }[core.topdown or ""]
    # Arrow Lake-H's low-power Crestmont table names them only *.ALL_P: the same events on general counters.
    specs = [*(_spec(events, name, perfmon, twin=f"{name}_P") for name in _ECORE_EVENTS), ARCH_EVENTS["cycles"]]
    return TopdownPlan(
        method,
        events=tuple(specs),
        keys=tuple(e.key for e in specs),
        gp_counters=_gp_needed(specs, perfmon, core_type),
        detail=f"E-core events ({core.name}, {core.width} wide)",
        width=core.width,
        core=core.name,
    )


def _plan_goldmont(
    core: uarch.CoreUarch, core_type: CoreType | None, perfmon: PerfmonInfo, events: Mapping[str, IntelEvent]
) -> TopdownPlan:
    method = GOLDMONT_PLUS if core.topdown == uarch.TD_GOLDMONT_PLUS else GOLDMONT
    specs = [*(_spec(events, name, perfmon) for name in _GOLDMONT_EVENTS), ARCH_EVENTS["cycles"]]
    return TopdownPlan(
        method,
        events=tuple(specs),
        keys=tuple(e.key for e in specs),
        gp_counters=_gp_needed(specs, perfmon, core_type),
        detail=f"issued / retired / not-delivered / recovery slots ({core.name}, {core.width} wide)",
        width=core.width,
        core=core.name,
    )
