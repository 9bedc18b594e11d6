"""What the simulated PMU counts for an event: each encoding as a function of the workload's amounts.

Architectural events count the workload's quantities; the model-specific encodings of the top-down methods
(the four-event formula on Skylake server, Gracemont's E-core events) count its top-down truth; anything
else counts a hash-derived fraction of instructions or cycles (pmutop.sim.model's docstring: Approximations).
"""

from __future__ import annotations

import operator
from collections.abc import Callable

from pmutop.pmu import registers
from pmutop.sim.workload import Amounts, hash_unit

BUS_HZ = 100_000_000  # the architectural ref event on a GP counter ticks at the bus clock
_PPM = 1_000_000

# -- the model-specific encodings that count top-down truth ------------------------------------------------

CountFn = Callable[[Amounts], int]
_FIELDS: dict[str, CountFn] = {}
_INDEX_OF: dict[int, int] = {}  # id of a _field getter (kept in _FIELDS) -> its Amounts position


def _field(name: str) -> CountFn:
    """An event that counts one workload quantity: attrgetter is a C call (these run for every enabled counter on
    every register access), same value as `lambda a: a.<name>`; one getter per quantity (see field_index)."""
    fn = _FIELDS.get(name)
    if fn is None:
        fn = _FIELDS[name] = operator.attrgetter(name)
        _INDEX_OF[id(fn)] = Amounts._fields.index(name)
    return fn


def field_index(fn: CountFn) -> int | None:
    """The Amounts position an event counts, where it counts one quantity as it is (no fraction, no scale): its
    count over a stretch is then that quantity's growth."""
    return _INDEX_OF.get(id(fn))


# Skylake server, the four-event formula (reference topdown.md section 2). Encodings from Intel's table
# /work/shared/perfmon/SKX/events/skylakex_core.json (perfmon SKX/events/skylakex_core.json):
# UOPS_ISSUED.ANY EventCode 0x0E UMask 0x01; UOPS_RETIRED.RETIRE_SLOTS 0xC2/0x02; IDQ_UOPS_NOT_DELIVERED.CORE
# 0x9C/0x01; INT_MISC.RECOVERY_CYCLES 0x0D/0x01 (INT_MISC.RECOVERY_CYCLES_ANY is the same with AnyThread=1,
# which this model ignores). CPU_CLK_UNHALTED.THREAD(_ANY) is fixed counter 1 (event 0x00 umask 0x02) or
# 0x3C/0x00 on a GP counter: cycles, already architectural.
SKX_EVENTS: dict[tuple[int, int], CountFn] = {
    (0x0E, 0x01): _field("uops_issued"),
    (0xC2, 0x02): _field("td_retiring"),
    (0x9C, 0x01): _field("td_fe_bound"),
    (0x0D, 0x01): _field("recovery_cycles"),
}
_CYCLE_EVENTS = frozenset([(0x0D, 0x01)])  # model events that count cycles (at most 1 per cycle)
# Gracemont (Alder Lake E-cores), slots = 5 x CPU_CLK_UNHALTED.CORE. Encodings from
# /work/shared/perfmon/ADL/events/alderlake_gracemont_core.json: TOPDOWN_FE_BOUND.ALL 0x71/0x00,
# TOPDOWN_BAD_SPECULATION.ALL 0x73/0x00, TOPDOWN_BE_BOUND.ALL 0x74/0x00, TOPDOWN_RETIRING.ALL 0xC2/0x00.
GRACEMONT_EVENTS: dict[tuple[int, int], CountFn] = {
    (0x71, 0x00): _field("td_fe_bound"),
    (0x73, 0x00): _field("td_bad_spec"),
    (0x74, 0x00): _field("td_be_bound"),
    (0xC2, 0x00): _field("td_retiring"),
}

# -- every other encoding ------------------------------------------------------------------------------------

# Architectural events (SDM table of CPUID.0AH:EBX events); 0x3C/0x01 depends on tsc_hz, see event_fn.
_ARCH_EVENTS: dict[tuple[int, int], CountFn] = {
    (0x3C, 0x00): _field("cycles"),
    (0xC0, 0x00): _field("instructions"),
    (0x2E, 0x4F): _field("llc_references"),
    (0x2E, 0x41): _field("llc_misses"),
    (0xC4, 0x00): _field("branches"),
    (0xC5, 0x00): _field("branch_misses"),
    (0xA4, 0x01): _field("slots"),
}


def _fraction(count: Callable[[Amounts], int], ppm: int) -> CountFn:
    return lambda a: count(a) * ppm // _PPM


def event_fn(evtsel: int, tsc_hz: int, model_events: dict[tuple[int, int], CountFn] | None = None) -> CountFn:
    """Cumulative count of the event an EVTSEL selects, as a monotonic function of workload amounts.
    `model_events`: the core's own encodings (top-down events) before the architectural ones.

    Deltas are taken as f(new) - f(old), so floored fractions never drift or go negative.
    """
    event = evtsel & registers.EVTSEL_EVENT_MASK
    umask = (evtsel >> registers.EVTSEL_UMASK_SHIFT) & 0xFF
    cmask = (evtsel >> registers.EVTSEL_CMASK_SHIFT) & 0xFF
    edge = bool(evtsel & registers.EVTSEL_EDGE)
    inv = bool(evtsel & registers.EVTSEL_INV)
    if event == 0:
        return lambda a: 0
    if cmask == 1 and not (edge or inv) and (event, umask) in _CYCLE_EVENTS and model_events:
        # An event counting cycles already counts 1 per cycle: CMASK=1 changes nothing (Linux programs
        # topdown-recovery-bubbles on Skylake as event=0xd,umask=0x1,cmask=1).
        return model_events.get((event, umask)) or (lambda a: 0)
    if cmask or edge:
        p = (0.05 + 0.9 * hash_unit(event, umask, 0x636D61736B)) / max(cmask, 1)
        if inv and cmask:
            p = 1.0 - p
        if edge:
            p = p * (1.0 - p) / 8.0
        return _fraction(_field("cycles"), int(p * _PPM))
    if (event, umask) == (0x3C, 0x01):
        return lambda a: a.ref_cycles * BUS_HZ // tsc_hz
    fn = (model_events or {}).get((event, umask)) or _ARCH_EVENTS.get((event, umask))
    if fn is not None:
        return fn
    # Log-uniform between 0.001% and 30% of instructions: most real events are rare per instruction.
    ppm = int(10 * 30_000 ** hash_unit(event, umask, 0x726177))
    return _fraction(_field("instructions"), ppm)


FIXED_FNS: tuple[CountFn, ...] = (
    _field("instructions"),
    _field("cycles"),
    _field("ref_cycles"),  # TSC rate while unhalted
    _field("slots"),
)
