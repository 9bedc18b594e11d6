"""Placing events on counters: the fixed trio on fixed counters, the rest on general-purpose ones."""

from __future__ import annotations

from dataclasses import dataclass

from pmutop.errors import UsageError
from pmutop.pmu.cpuid_decode import PerfmonInfo
from pmutop.pmu.events import ARCH_EVENTS, DEFAULT_EVENTS, FIXED_TRIO, EventSpec


@dataclass(frozen=True)
class Placement:
    event: EventSpec
    kind: str  # "fixed" or "gp"
    index: int


@dataclass(frozen=True)
class CounterPlan:
    fixed: tuple[Placement, ...]
    gp: tuple[Placement, ...]
    n_fixed_read: int  # fixed counters 0..n-1 are read each tick
    n_gp_read: int  # GP counters 0..n-1 are read each tick
    dropped: tuple[tuple[str, str], ...]  # (event name, reason) for events left out

    def value_index(self, p: Placement) -> int:
        """Position of this placement's value in a reader's output (fixed first, then GP)."""
        return p.index if p.kind == "fixed" else self.n_fixed_read + p.index

    @property
    def placements(self) -> tuple[Placement, ...]:
        return self.fixed + self.gp

    @property
    def keys(self) -> list[str]:
        return [p.event.key for p in self.placements]


def _leading_ones(mask: int) -> int:
    n = 0
    while mask >> n & 1:
        n += 1
    return n


def plan_counters(perfmon: PerfmonInfo, requested: list[EventSpec] | None, *, cpu: int) -> CounterPlan:
    """Place `requested` events (None = the default set) on this CPU's counters.

    Explicitly requested events that cannot be counted are errors; default events that do not fit
    are dropped (LLC events are kept before branch events) and listed in `dropped`.
    """
    explicit = {e.key for e in requested} if requested is not None else set()
    if requested is None:
        events = [ARCH_EVENTS[n] for n in DEFAULT_EVENTS]
    else:
        # The fixed counters are free, and util/GHz/IPC need them, so they are always counted.
        events = [ARCH_EVENTS[n] for n in FIXED_TRIO if ARCH_EVENTS[n].key not in explicit] + list(requested)

    fixed_avail = _leading_ones(perfmon.fixed_mask)
    gp_avail = _leading_ones(perfmon.gp_mask)
    fixed: list[Placement] = []
    gp_wanted: list[EventSpec] = []
    dropped: list[tuple[str, str]] = []

    def refuse(e: EventSpec, reason: str) -> None:
        if e.key in explicit:
            raise UsageError(f"cpu {cpu}: cannot count {e.name}: {reason}")
        dropped.append((e.name, reason))

    for e in events:
        if e.arch_bit is not None and e.name in perfmon.unavailable_events:
            refuse(e, "CPUID.0AH marks this architectural event unavailable")
        elif e.fixed_index is not None and e.fixed_index < fixed_avail:
            fixed.append(Placement(e, "fixed", e.fixed_index))
        elif e.raw is not None:
            gp_wanted.append(e)
        else:
            refuse(e, f"it needs fixed counter {e.fixed_index}, which this CPU does not have")

    for e in gp_wanted[gp_avail:]:
        if e.key in explicit:
            names = ", ".join(x.name for x in gp_wanted)
            raise UsageError(
                f"cpu {cpu}: {len(gp_wanted)} programmable events ({names}) but only {gp_avail} "
                "general-purpose counters"
            )
        dropped.append((e.name, f"only {gp_avail} general-purpose counters"))
    gp = [Placement(e, "gp", i) for i, e in enumerate(gp_wanted[:gp_avail])]
    fixed.sort(key=lambda p: p.index)
    return CounterPlan(
        fixed=tuple(fixed),
        gp=tuple(gp),
        n_fixed_read=(fixed[-1].index + 1) if fixed else 0,
        n_gp_read=len(gp),
        dropped=tuple(dropped),
    )
