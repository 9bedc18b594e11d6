"""Intel event names (EventSpec.from_tables) turned into the encodings pmutop programs, for one CPU."""

from __future__ import annotations

from dataclasses import dataclass

from pmutop.core.errors import UsageError
from pmutop.pmu.cpuid_decode import CpuIdentity
from pmutop.pmu.events import EventSpec
from pmutop.pmu.perfmon.intel_event import IntelEvent
from pmutop.pmu.perfmon.tables import INTEL_VENDOR, MAPFILE, PerfmonTables, cpuid_string
from pmutop.pmu.registers import MAX_FIXED_COUNTERS, RawEvent


@dataclass(frozen=True)
class AnyThreadSpec(EventSpec):
    """A table event counted with the AnyThread bit (PERFEVTSEL bit 21, or the fixed counter's AnyThread bit):
    it counts for both hyper-threads of the core. Only the top-down four-event formula on PMU v3-v4 with SMT
    on asks for one (pmutop.pmu.topdown_plan, via to_spec(any_thread=True)); `--events` never yields it."""

    any_thread: bool = True


def to_spec(ev: IntelEvent, *, any_thread: bool = False, max_fixed: int = MAX_FIXED_COUNTERS) -> EventSpec:
    """The EventSpec pmutop programs for a table event; UsageError when it cannot be counted as defined.

    any_thread=True lets an AnyThread event through as an AnyThreadSpec, and max_fixed raises the fixed
    counter limit: for the top-down planner only (see IntelEvent.problem_for).
    """
    why = ev.problem_for(any_thread=any_thread, max_fixed=max_fixed)
    if why is not None:
        raise UsageError(f"{ev.name} {why}; pick another event (see `pmutop events --search WORD`)")
    fixed_only = ev.fixed_counter is not None
    raw = None if fixed_only else RawEvent(ev.event_code, ev.umask, ev.cmask, ev.inv, ev.edge)
    cls = AnyThreadSpec if ev.any_thread else EventSpec
    return cls(
        name=ev.name,
        raw=raw,
        fixed_index=ev.fixed_counter,
        counters=ev.counters,
        from_tables=True,
        description=ev.description,
    )


NO_TABLES_HINT = "run `pmutop events --download`, or give --perfmon-dir DIR (or set PMUTOP_PERFMON_DIR)"


class Resolver:
    """Turns Intel event names (EventSpec.from_tables) into encodings for one CPU."""

    def __init__(self, tables: PerfmonTables | None) -> None:
        self.tables = tables

    def resolve(
        self,
        spec: EventSpec,
        identity: CpuIdentity,
        core_type: int | None,
        native_model_id: int | None = None,
    ) -> EventSpec:
        if not spec.from_tables:
            return spec
        if identity.vendor != INTEL_VENDOR:
            raise UsageError(
                f"unknown event {spec.name!r}: not an architectural or software event, and Intel's perfmon "
                f"tables do not describe {identity.vendor or 'this vendor'}'s CPUs"
            )
        if self.tables is None:
            # Said as "unknown event" first: a typo is likelier than an Intel name on a machine without tables.
            raise UsageError(
                f"unknown event {spec.name!r}: not an architectural or software event, and Intel event names "
                f"need Intel's perfmon tables: {NO_TABLES_HINT}"
            )
        files = self.tables.files_for(identity, core_type, native_model_id)
        if not files:
            raise UsageError(
                f"unknown event {spec.name!r}: {self.tables.root / MAPFILE} has no core event table for "
                f"{cpuid_string(identity)} (update the tables with `pmutop events --download`)"
            )
        ev = self.tables.events_for(identity, core_type, native_model_id).get(spec.name.upper())
        if ev is None:
            names = ", ".join(p.name for p in files)
            raise UsageError(
                f"unknown event {spec.name!r}: not an architectural or software event, "
                f"and not in Intel's tables for this CPU ({names})"
            )
        return to_spec(ev)  # named as Intel spells it, whatever case the user typed
