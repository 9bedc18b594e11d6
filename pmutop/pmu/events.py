"""Event names pmutop understands and the `--events` syntax.

Architectural names (CPUID.0AH event list), raw `event=0x..,umask=0x..[,cmask=..,inv,edge]`, and the
perf-style `r<config hex>` pmutop prints raw events as (e.g. `r412e`, `r48001c4`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from pmutop.core.errors import UsageError
from pmutop.pmu.registers import (
    EVTSEL_ANY,
    EVTSEL_CMASK_SHIFT,
    EVTSEL_EDGE,
    EVTSEL_EN,
    EVTSEL_EVENT_MASK,
    EVTSEL_INT,
    EVTSEL_INV,
    EVTSEL_OS,
    EVTSEL_PC,
    EVTSEL_UMASK_SHIFT,
    EVTSEL_USR,
    RawEvent,
)


@dataclass(frozen=True)
class EventSpec:
    name: str  # as the user writes it: "llc-misses", "r412e", "MEM_LOAD_RETIRED.L3_MISS"
    raw: RawEvent | None  # encoding for a general-purpose counter; None = fixed counter only (or not a PMU event)
    fixed_index: int | None = None  # fixed counter that counts exactly this event
    arch_bit: int | None = None  # CPUID.0AH:EBX "unavailable" bit
    counters: int | None = None  # bitmask of the GP counters it may use (Intel tables' "Counter"); None = any
    hardware: int | None = None  # perf's generic PERF_TYPE_HARDWARE config (architectural names)
    software: int | None = None  # PERF_TYPE_SOFTWARE config: a kernel software event (perf backend only)
    from_tables: bool = False  # an Intel event name: resolved per CPU from the perfmon tables
    description: str = ""
    any_thread: bool = False  # counts for both hyper-threads of the core (AnyThreadSpec)
    # Name used in JSON/CSV output and sample dictionaries: made once here, since the samplers look it up
    # for every sample (dataclasses.replace makes it again from the new name).
    key: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", self.name.replace("-", "_").replace(".", "_").lower())

    @property
    def resolved(self) -> bool:
        return not self.from_tables or self.raw is not None or self.fixed_index is not None


# ref-cycles has no GP encoding here: the architectural 0x013C counts at the bus clock on a GP counter,
# not at the TSC rate, so it would not mean the same thing.
# `hardware` values are perf's enum perf_hw_id (include/uapi/linux/perf_event.h).
ARCH_EVENTS: dict[str, EventSpec] = {
    e.name: e
    for e in (
        EventSpec(
            "instructions",
            RawEvent(0xC0, 0x00),
            fixed_index=0,
            arch_bit=1,
            hardware=1,
            description="instructions retired",
        ),
        EventSpec(
            "cycles",
            RawEvent(0x3C, 0x00),
            fixed_index=1,
            arch_bit=0,
            hardware=0,
            description="core cycles while not halted",
        ),
        EventSpec(
            "ref-cycles",
            None,
            fixed_index=2,
            arch_bit=2,
            hardware=9,
            description="reference (TSC-rate) cycles while not halted",
        ),
        EventSpec(
            "llc-references", RawEvent(0x2E, 0x4F), arch_bit=3, hardware=2, description="last-level cache references"
        ),
        EventSpec("llc-misses", RawEvent(0x2E, 0x41), arch_bit=4, hardware=3, description="last-level cache misses"),
        EventSpec("branches", RawEvent(0xC4, 0x00), arch_bit=5, hardware=4, description="branch instructions retired"),
        EventSpec(
            "branch-misses", RawEvent(0xC5, 0x00), arch_bit=6, hardware=5, description="mispredicted branches retired"
        ),
    )
}
# Kernel software events (enum perf_sw_ids): real per-CPU data even where the PMU is hidden (VMs).
SOFTWARE_EVENTS: dict[str, EventSpec] = {
    e.name: e
    for e in (
        EventSpec("cpu-clock", None, software=0, description="CPU clock, ns (counts idle time on a CPU-wide event)"),
        EventSpec("task-clock", None, software=1, description="task clock, ns"),
        EventSpec("page-faults", None, software=2, description="page faults"),
        EventSpec("context-switches", None, software=3, description="context switches"),
        EventSpec("cpu-migrations", None, software=4, description="migrations of tasks to this CPU"),
        EventSpec("minor-faults", None, software=5, description="minor page faults"),
        EventSpec("major-faults", None, software=6, description="major page faults"),
    )
}
SOFTWARE_ALIASES = {"cs": "context-switches", "migrations": "cpu-migrations", "faults": "page-faults"}
DEFAULT_SOFTWARE_EVENTS = ("context-switches", "cpu-migrations", "page-faults")
FIXED_TRIO = ("instructions", "cycles", "ref-cycles")
# Programmable defaults in priority order: when counters are short, the tail is dropped first.
DEFAULT_GP_EVENTS = ("llc-references", "llc-misses", "branches", "branch-misses")
DEFAULT_EVENTS = FIXED_TRIO + DEFAULT_GP_EVENTS

_RAW_FIELDS = {"event": 0xFF, "umask": 0xFF, "cmask": 0xFF}
# Intel's names: upper-case words joined by '_' with an optional '.' part, e.g. LONGEST_LAT_CACHE.MISS
_TABLE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)*")
_RAW_FLAGS = ("inv", "edge")
# perf's raw syntax, as raw_event_spec names events. Intel names always hold a '_', so they never match.
_PERF_RAW = re.compile(r"[rR]([0-9a-fA-F]+)")
# PERFEVTSEL bits a user may not set through r<hex>: pmutop owns USR/OS/EN (--user-only/--kernel-only)
# and never sets PC, INT (no PMI handler is ours) or AnyThread.
_RAW_FORBIDDEN = (
    (EVTSEL_USR, "USR"),
    (EVTSEL_OS, "OS"),
    (EVTSEL_PC, "PC"),
    (EVTSEL_INT, "INT"),
    (EVTSEL_ANY, "ANY"),
    (EVTSEL_EN, "EN"),
)
_SHOWN = 40  # characters of a bad token echoed in a message


def _shown(token: str) -> str:
    return repr(token) if len(token) <= _SHOWN else repr(token[:_SHOWN]) + f"... ({len(token)} characters)"


def raw_event_spec(raw: RawEvent) -> EventSpec:
    """A raw event named like perf's raw syntax: r<config hex>, e.g. r412e."""
    return EventSpec(f"r{raw.config:04x}", raw)


def perf_raw_event(token: str, digits: str) -> RawEvent:
    """`r<hex>` (perf's raw config) -> the RawEvent whose `config` it is; UsageError for bits pmutop owns."""
    config = int(digits, 16)
    if config >> 32:
        raise UsageError(
            f"bad --events token {_shown(token)}: bits above 31 cannot be set (a raw event is at most r<8 hex digits>)"
        )
    bad = [(bit.bit_length() - 1, name) for bit, name in _RAW_FORBIDDEN if config & bit]
    if bad:
        which = ", ".join(f"{n} ({name})" for n, name in bad)
        raise UsageError(
            f"bad --events token {_shown(token)}: {'bit' if len(bad) == 1 else 'bits'} {which} cannot be set: "
            "pmutop sets USR/OS/EN itself (see --user-only/--kernel-only) and never PC, INT or ANY"
        )
    event = config & EVTSEL_EVENT_MASK
    if event == 0:
        raise UsageError(f"bad --events token {_shown(token)}: event select 0 is not an event")
    return RawEvent(
        event,
        config >> EVTSEL_UMASK_SHIFT & 0xFF,
        config >> EVTSEL_CMASK_SHIFT & 0xFF,
        inv=bool(config & EVTSEL_INV),
        edge=bool(config & EVTSEL_EDGE),
    )


def _number(token: str, field: str, value: str, limit: int) -> int:
    try:
        n = int(value, 0)
    except ValueError:
        raise UsageError(f"bad --events token {_shown(token)}: {field} must be a number like 0x2e") from None
    if not 0 <= n <= limit:
        raise UsageError(f"bad --events token {_shown(token)}: {field} is {limit.bit_length()} bits (0-{limit:#x})")
    return n


def _flag(token: str, name: str, value: str | None) -> bool:
    if value is None or value in ("1",):
        return True
    if value == "0":
        return False
    raise UsageError(f"bad --events token {_shown(token)}: {name} takes no value, or 0/1")


def parse_events(values: Iterable[str]) -> list[EventSpec]:
    """Parse one or more `--events` values (comma-separated) into event specs, in order, without duplicates.

    A raw event starts at `event=` and takes the following `umask=`, `cmask=`, `inv`, `edge` tokens.
    """
    tokens = [t.strip() for v in values for t in v.split(",")]
    specs: list[EventSpec] = []
    fields: dict[str, int] | None = None
    flags: dict[str, bool] = {}

    def finish_raw() -> None:
        nonlocal fields, flags
        if fields is not None:
            raw = RawEvent(fields["event"], fields.get("umask", 0), fields.get("cmask", 0), **flags)
            specs.append(raw_event_spec(raw))
        fields, flags = None, {}

    for token in tokens:
        if not token:
            raise UsageError("bad --events value: empty event name (stray comma?)")
        name, eq, value = token.partition("=")
        name = name.strip().lower()
        if name == "event" and eq:
            finish_raw()
            fields = {"event": _number(token, "event", value, 0xFF)}
            if fields["event"] == 0:
                raise UsageError(f"bad --events token {_shown(token)}: event select 0 is not an event")
        elif name in _RAW_FIELDS and eq:
            if fields is None:
                raise UsageError(f"bad --events token {_shown(token)}: {name}= must follow event=0x..")
            if name in fields:
                raise UsageError(f"bad --events token {_shown(token)}: {name} given twice")
            fields[name] = _number(token, name, value, _RAW_FIELDS[name])
        elif name in _RAW_FLAGS:
            if fields is None:
                raise UsageError(f"bad --events token {_shown(token)}: {name} must follow event=0x..")
            flags[name] = _flag(token, name, value if eq else None)
        elif perf_raw := _PERF_RAW.fullmatch(token):
            finish_raw()
            specs.append(raw_event_spec(perf_raw_event(token, perf_raw.group(1))))
        else:
            finish_raw()
            lower = token.lower()
            spec = ARCH_EVENTS.get(lower) or SOFTWARE_EVENTS.get(SOFTWARE_ALIASES.get(lower, lower))
            if spec is None:
                if not _TABLE_NAME.fullmatch(token):
                    known = ", ".join([*ARCH_EVENTS, *SOFTWARE_EVENTS])
                    raise UsageError(
                        f"unknown event {_shown(token)} in --events (known: {known}, an Intel event name such as "
                        "MEM_LOAD_RETIRED.L3_MISS, event=0x..,umask=0x.. or r<hex> such as r412e)"
                    )
                # Resolved per CPU by the backend, from the perfmon tables of that CPU's model and core type.
                spec = EventSpec(token.upper(), None, from_tables=True)
            specs.append(spec)
    finish_raw()

    unique: list[EventSpec] = []
    for s in specs:
        if all(s.key != u.key for u in unique):
            unique.append(s)
    return unique
