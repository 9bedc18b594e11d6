"""Placing events on counters: the fixed trio on fixed counters, the rest on general-purpose ones.

When more programmable events are asked for than there are counters, they are split into groups that
each fit (respecting per-event counter restrictions from Intel's tables); the msr backend rotates the
groups across intervals and reports those events as estimates.
"""

from __future__ import annotations

from dataclasses import dataclass

from pmutop.core.errors import UsageError
from pmutop.pmu.cpuid_decode import PerfmonInfo
from pmutop.pmu.events import ARCH_EVENTS, DEFAULT_EVENTS, FIXED_TRIO, EventSpec
from pmutop.pmu.registers import register_map


@dataclass(frozen=True)
class Placement:
    event: EventSpec
    kind: str  # "fixed" or "gp"
    index: int


@dataclass(frozen=True)
class CounterPlan:
    fixed: tuple[Placement, ...]
    gp_groups: tuple[tuple[Placement, ...], ...]  # one group: no rotation
    n_fixed_read: int  # fixed counters 0..n-1 are read each tick
    n_gp_read: int  # GP counters 0..n-1 are read each tick
    dropped: tuple[tuple[str, str], ...]  # (event name, reason) for events left out

    @property
    def gp(self) -> tuple[Placement, ...]:
        """The GP placements of the first group (all of them when nothing rotates)."""
        return self.gp_groups[0] if self.gp_groups else ()

    @property
    def rotating(self) -> bool:
        return len(self.gp_groups) > 1

    @property
    def keys(self) -> list[str]:
        """Every event counted, in order: fixed, then each group's GP events."""
        keys = [p.event.key for p in self.fixed]
        for group in self.gp_groups:
            keys += [p.event.key for p in group if p.event.key not in keys]
        return keys


def _leading_ones(mask: int) -> int:
    n = 0
    while mask >> n & 1:
        n += 1
    return n


def assign(events: list[EventSpec], n_counters: int) -> list[int] | None:
    """Counter index for each event honouring its allowed-counter mask, or None if impossible.

    A bipartite matching (augmenting paths, Kuhn's algorithm): exact, and polynomial. A plain backtracking
    search was fine for 8 counters but explores 10! placements to prove that an 11th event restricted to
    Lion Cove's counters 0-9 does not fit.
    """
    owner: dict[int, int] = {}  # counter -> event

    def augment(i: int, seen: set[int]) -> bool:
        allowed = [c for c in range(n_counters) if _mask(events[i], n_counters) >> c & 1]
        # A free counter first (the lowest), so unrestricted events keep counters 0, 1, 2... in order;
        # only then move an earlier event elsewhere to make room.
        free = next((c for c in allowed if c not in owner), None)
        if free is not None:
            owner[free] = i
            return True
        for c in allowed:
            if c not in seen:
                seen.add(c)
                if augment(owner[c], seen):
                    owner[c] = i
                    return True
        return False

    # Most-constrained first only makes the result predictable (same as before); any order is exact.
    order = sorted(range(len(events)), key=lambda i: _mask(events[i], n_counters).bit_count())
    if not all(augment(i, set()) for i in order):
        return None
    chosen = {i: c for c, i in owner.items()}
    return [chosen[i] for i in range(len(events))]


def _mask(e: EventSpec, n: int) -> int:
    full = (1 << n) - 1
    return full if e.counters is None else e.counters & full


def _groups(events: list[EventSpec], n: int) -> list[list[Placement]]:
    """Fill groups in order; an event that fits no open group starts a new one."""
    groups: list[list[EventSpec]] = []
    for e in events:
        if not _mask(e, n):
            raise UsageError(f"{e.name} may only use GP counters {e.counters:#x}, which this CPU does not have")
        for g in groups:
            if len(g) < n and assign([*g, e], n) is not None:
                g.append(e)
                break
        else:
            groups.append([e])
    placed = []
    for g in groups:
        idx = assign(g, n)
        assert idx is not None
        placed.append(sorted((Placement(e, "gp", i) for e, i in zip(g, idx, strict=True)), key=lambda p: p.index))
    return placed


def plan_counters(
    perfmon: PerfmonInfo, requested: list[EventSpec] | None, *, cpu: int, rotate: bool = True
) -> CounterPlan:
    """Place `requested` events (None = the default set) on this CPU's counters.

    Default events that do not fit are dropped (LLC events are kept before branch events) and listed
    in `dropped`. Explicitly requested events that cannot be counted are errors; when they outnumber
    the GP counters they are split into rotation groups (or, with rotate=False, refused).
    """
    for e in requested or []:
        if e.software is not None:
            raise UsageError(f"{e.name} is a kernel software event: it needs --backend perf")
        if not e.resolved:
            raise UsageError(f"{e.name} must be resolved from Intel's tables first")
    explicit = {e.key for e in requested} if requested is not None else set()
    if requested is None:
        events = [ARCH_EVENTS[n] for n in DEFAULT_EVENTS]
    else:
        # The fixed counters are free, and util/GHz/IPC need them, so they are always counted.
        events = [ARCH_EVENTS[n] for n in FIXED_TRIO if ARCH_EVENTS[n].key not in explicit] + list(requested)

    # Counters below the first hole of each bitmap (readers fetch 0..n-1 in one rdpmc sweep, and rdpmc of a
    # missing counter faults), and only as many as this PMU version has registers for: the same map
    # (registers.register_map) gives the addresses and the MSR allowlist, so nothing placed can be refused.
    regs = register_map(perfmon.version)
    fixed_avail = min(_leading_ones(perfmon.fixed_mask), regs.max_fixed)
    gp_avail = min(_leading_ones(perfmon.gp_mask), regs.max_gp)
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
            # Two names for one fixed counter (INST_RETIRED.ANY and instructions) read the same counter.
            fixed.append(Placement(e, "fixed", e.fixed_index))
        elif e.raw is not None:
            gp_wanted.append(e)
        else:
            refuse(e, f"it needs fixed counter {e.fixed_index}, which this CPU does not have")

    defaults = [e for e in gp_wanted if e.key not in explicit]
    wanted = [e for e in gp_wanted if e.key in explicit]
    if gp_avail == 0 and wanted:
        raise UsageError(f"cpu {cpu}: no general-purpose counters for {', '.join(e.name for e in wanted)}")
    if wanted:
        groups = _groups(wanted, gp_avail)
        if len(groups) > 1 and not rotate:
            names = ", ".join(x.name for x in wanted)
            raise UsageError(
                f"cpu {cpu}: {len(wanted)} programmable events ({names}) do not fit the {gp_avail} "
                "general-purpose counters at once"
            )
        for e in defaults:
            dropped.append((e.name, "the requested events use the general-purpose counters"))
    else:
        fitting = defaults[:gp_avail]
        for e in defaults[gp_avail:]:
            dropped.append((e.name, f"only {gp_avail} general-purpose counters"))
        groups = [[Placement(e, "gp", i) for i, e in enumerate(fitting)]] if fitting else []
    fixed.sort(key=lambda p: p.index)
    n_gp_read = max((p.index + 1 for g in groups for p in g), default=0)
    return CounterPlan(
        fixed=tuple(fixed),
        gp_groups=tuple(tuple(g) for g in groups),
        n_fixed_read=(fixed[-1].index + 1) if fixed else 0,
        n_gp_read=n_gp_read,
        dropped=tuple(dropped),
    )
