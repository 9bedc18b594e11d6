"""The top-down events pmutop counts on cores without PERF_METRICS, built in: no perfmon tables needed.

Facts transcribed from Intel's perfmon tables (github.com/intel/perfmon, BSD-3-Clause), one table per core
microarchitecture (the names pmutop.pmu.uarch.core_uarch gives). Each entry lists the perfmon files and the
event name it was read from (`sources`): tests/test_issue22_builtin_topdown.py checks every entry against
those files, and every CPU model that maps to a core against the file Intel's mapfile.csv gives it.
Where Linux has the same event, the kernel's encoding (arch/x86/events/intel/core.c) is cited beside it.

Only what the top-down plans use is here (pmutop.pmu.topdown_plan); the perfmon tables still resolve the
event names a user types, and cross-check these entries when they are present (`differences`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pmutop.pmu.perfmon.intel_event import IntelEvent


@dataclass(frozen=True)
class BuiltinEvent:
    """One transcribed event: its encoding, and the perfmon files (relative to the perfmon root) naming it."""

    event: IntelEvent
    sources: tuple[str, ...]


def _entry(
    name: str,
    code: int,
    umask: int,
    files: tuple[str, ...],
    *,
    cmask: int = 0,
    any_thread: bool = False,
    fixed: int | None = None,
    counters: int | None = None,
    description: str = "",
) -> BuiltinEvent:
    event = IntelEvent(
        name=name,
        event_code=code,
        umask=umask,
        cmask=cmask,
        any_thread=any_thread,
        fixed_counter=fixed,
        counters=counters,
        description=description,
    )
    return BuiltinEvent(event, files)


# --- Sandy Bridge .. Cascade Lake: the four-event formula -------------------------------------------------
# Linux core.c snb_events_attrs: topdown-slots-issued "event=0xe,umask=0x1" (UOPS_ISSUED.ANY),
# topdown-slots-retired "event=0xc2,umask=0x2" (UOPS_RETIRED.RETIRE_SLOTS), topdown-fetch-bubbles
# "event=0x9c,umask=0x1" (IDQ_UOPS_NOT_DELIVERED.CORE), topdown-total-slots "event=0x3c,umask=0x0" (",any=1"
# with HT on: CPU_CLK_UNHALTED.THREAD_ANY), topdown-recovery-bubbles "event=0xd,umask=0x3,cmask=1" (",any=1"
# with HT on). intel_pmu_init, Skylake case: "INT_MISC.RECOVERY_CYCLES has umask 1 in Skylake",
# "event=0xd,umask=0x1,cmask=1"; Intel's Skylake tables give 0x0D/0x01 with no counter mask (that umask
# already counts cycles), and pmutop programs Intel's encoding.
_SNB = ("SNB/events/sandybridge_core.json", "JKT/events/Jaketown_core.json")
_IVB = ("IVB/events/ivybridge_core.json", "IVT/events/ivytown_core.json")
_HSW = ("HSW/events/haswell_core.json", "HSX/events/haswellx_core.json")
_BDW = ("BDW/events/broadwell_core.json", "BDW-DE/events/broadwellde_core.json", "BDX/events/broadwellx_core.json")
_SKL = ("SKL/events/skylake_core.json", "SKX/events/skylakex_core.json", "CLX/events/cascadelakex_core.json")


def _four_event_formula(
    files: tuple[str, ...], recovery_umask: int, recovery_cmask: int, fetch_bubble_counters: int | None
) -> list[BuiltinEvent]:
    """The four-event formula's events (and their AnyThread forms for SMT) as `files` give them."""
    return [
        _entry("UOPS_ISSUED.ANY", 0x0E, 0x01, files, description="uops the RAT issued to the RS"),
        _entry("UOPS_RETIRED.RETIRE_SLOTS", 0xC2, 0x02, files, description="retirement slots used"),
        _entry(
            "IDQ_UOPS_NOT_DELIVERED.CORE",
            0x9C,
            0x01,
            files,
            counters=fetch_bubble_counters,
            description="issue slots the frontend left empty",
        ),
        _entry(
            "INT_MISC.RECOVERY_CYCLES",
            0x0D,
            recovery_umask,
            files,
            cmask=recovery_cmask,
            description="cycles the allocator waited for recovery after a clear",
        ),
        _entry(
            "INT_MISC.RECOVERY_CYCLES_ANY",
            0x0D,
            recovery_umask,
            files,
            cmask=recovery_cmask,
            any_thread=True,
            description="the same for either thread of the core (AnyThread)",
        ),
        _entry(
            "CPU_CLK_UNHALTED.THREAD_P_ANY",
            0x3C,
            0x00,
            files,
            any_thread=True,
            description="core cycles while either thread is not halted (AnyThread)",
        ),
    ]


# --- E-cores: TOPDOWN_*.ALL ---------------------------------------------------------------------------
# Linux core.c adl_hybrid_events_attrs (the Atom half): topdown-retiring "event=0xc2,umask=0x0", topdown-bad-spec
# "event=0x73,umask=0x0", topdown-fe-bound "event=0x71,umask=0x0", topdown-be-bound "event=0x74,umask=0x0".
_GRT = ("ADL/events/alderlake_gracemont_core.json",)
_CMT = (
    "MTL/events/meteorlake_crestmont_core.json",
    "SRF/events/sierraforest_core.json",
    "GRR/events/grandridge_core.json",
)
# Arrow Lake-H's low-power Crestmont table names the same events only *.ALL_P (general counters).
_CMT_P = (*_CMT, "ARL/events/arrowlake_crestmont_core.json")
# Skymont: bad speculation, frontend bound and retiring are fixed counters 4, 5, 6 (Intel's tables give them the
# pseudo-encodings 0x00/0x05-0x07, never programmed). Their *.ALL_P twins are the general-counter encodings:
# what perf opens, and what Linux puts on those fixed counters itself (core.c intel_skt_event_constraints:
# FIXED_EVENT_CONSTRAINT 0x0073 -> 4, 0x019c -> 5, 0x02c2 -> 6; lnl_hybrid_events_attrs: topdown-retiring
# "event=0xc2,umask=0x02", topdown-fe-bound "event=0x9c,umask=0x01", topdown-be-bound "event=0xa4,umask=0x02").
_SKT = ("LNL/events/lunarlake_skymont_core.json", "ARL/events/arrowlake_skymont_core.json")


def _ecore(
    files: tuple[str, ...], *, retiring: int, bad_spec_umask: int = 0x00, suffix: str = ".ALL"
) -> list[BuiltinEvent]:
    return [
        _entry(f"TOPDOWN_FE_BOUND{suffix}", 0x71, 0x00, files, description="issue slots lost to the frontend"),
        _entry(
            f"TOPDOWN_BAD_SPECULATION{suffix}",
            0x73,
            bad_spec_umask,
            files,
            description="issue slots lost to wrong paths and machine clears",
        ),
        _entry(f"TOPDOWN_BE_BOUND{suffix}", 0x74, 0x00, files, description="issue slots lost to the backend"),
        _entry(f"TOPDOWN_RETIRING{suffix}", retiring, 0x00, files, description="issue slots that retired"),
    ]


_SKYMONT = [
    _entry("TOPDOWN_BAD_SPECULATION.ALL", 0x00, 0x05, _SKT, fixed=4, description="fixed counter 4"),
    _entry("TOPDOWN_FE_BOUND.ALL", 0x00, 0x06, _SKT, fixed=5, description="fixed counter 5"),
    _entry("TOPDOWN_BE_BOUND.ALL", 0xA4, 0x02, _SKT, description="issue slots lost to the backend"),
    _entry("TOPDOWN_RETIRING.ALL", 0x00, 0x07, _SKT, fixed=6, description="fixed counter 6"),
    _entry("TOPDOWN_BAD_SPECULATION.ALL_P", 0x73, 0x00, _SKT, description="its general-counter form"),
    _entry("TOPDOWN_FE_BOUND.ALL_P", 0x9C, 0x01, _SKT, description="its general-counter form"),
    _entry("TOPDOWN_BE_BOUND.ALL_P", 0xA4, 0x02, _SKT, description="its general-counter form"),
    _entry("TOPDOWN_RETIRING.ALL_P", 0xC2, 0x02, _SKT, description="its general-counter form"),
]

# Tremont (Snow Ridge, Elkhart Lake / Jasper Lake; Lakefield's E-cores, which mapfile.csv gives no table): the
# same events, TOPDOWN_BAD_SPECULATION.ALL being umask 0x06 (MISPREDICT 0x04 | MONUKE 0x02). Linux core.c
# tnt_events_attrs: topdown-fe-bound "event=0x71,umask=0x0", topdown-retiring "event=0xc2,umask=0x0",
# topdown-bad-spec "event=0x73,umask=0x6", topdown-be-bound "event=0x74,umask=0x0".
_TNT = ("SNR/events/snowridgex_core.json", "EHL/events/elkhartlake_core.json")

# --- Goldmont / Goldmont Plus: no TOPDOWN_* events ----------------------------------------------------------
# Linux core.c glm_events_attrs (used for both): topdown-slots-issued "event=0x0e" (UOPS_ISSUED.ANY),
# topdown-slots-retired "event=0xc2" (UOPS_RETIRED.ANY), topdown-fetch-bubbles "event=0x9c"
# (UOPS_NOT_DELIVERED.ANY), topdown-recovery-bubbles "event=0xca,umask=0x02" (ISSUE_SLOTS_NOT_CONSUMED.RECOVERY),
# topdown-total-slots "event=0x3c" (cycles) with scale 3, which intel_pmu_init sets to 4 for Goldmont Plus.
_GLM = ("GLM/events/goldmont_core.json",)
_GLP = ("GLP/events/goldmontplus_core.json",)


def _goldmont(files: tuple[str, ...]) -> list[BuiltinEvent]:
    return [
        _entry("UOPS_ISSUED.ANY", 0x0E, 0x00, files, description="uops issued into the backend"),
        _entry("UOPS_RETIRED.ANY", 0xC2, 0x00, files, description="uops that retired"),
        _entry("UOPS_NOT_DELIVERED.ANY", 0x9C, 0x00, files, description="issue slots the frontend left empty"),
        _entry(
            "ISSUE_SLOTS_NOT_CONSUMED.RECOVERY",
            0xCA,
            0x02,
            files,
            description="issue slots lost while recovering from a mispredict or clear",
        ),
    ]


# Core microarchitecture (pmutop.pmu.uarch) -> its events by name. Sandy Bridge .. Broadwell share
# INT_MISC.RECOVERY_CYCLES 0x0D/0x03 cmask 1, and count IDQ_UOPS_NOT_DELIVERED.CORE on counters 0-3 only (their
# tables: Counter and CounterHTOff "0,1,2,3", where other events may use 0-7 with Hyper-Threading off);
# Skylake (and Cascade Lake, the same core) has 0x0D/0x01 and no such limit.
_COUNTERS_0_3 = 0b1111
TOPDOWN_EVENTS: dict[str, dict[str, BuiltinEvent]] = {
    core: {e.event.name: e for e in entries}
    for core, entries in (
        ("Sandy Bridge", _four_event_formula(_SNB, 0x03, 1, _COUNTERS_0_3)),
        ("Ivy Bridge", _four_event_formula(_IVB, 0x03, 1, _COUNTERS_0_3)),
        ("Haswell", _four_event_formula(_HSW, 0x03, 1, _COUNTERS_0_3)),
        ("Broadwell", _four_event_formula(_BDW, 0x03, 1, _COUNTERS_0_3)),
        ("Skylake", _four_event_formula(_SKL, 0x01, 0, None)),
        ("Gracemont", _ecore(_GRT, retiring=0xC2)),
        ("Crestmont", _ecore(_CMT, retiring=0x72) + _ecore(_CMT_P, retiring=0x72, suffix=".ALL_P")),
        ("Skymont", _SKYMONT),
        ("Tremont", _ecore(_TNT, retiring=0xC2, bad_spec_umask=0x06)),
        ("Goldmont", _goldmont(_GLM)),
        ("Goldmont Plus", _goldmont(_GLP)),
    )
}


def events_for_core(core: str) -> dict[str, IntelEvent] | None:
    """The built-in events of core microarchitecture `core` by name, or None when pmutop ships none for it."""
    table = TOPDOWN_EVENTS.get(core)
    return None if table is None else {name: entry.event for name, entry in table.items()}


def _encoding(ev: IntelEvent) -> tuple[object, ...]:
    """What decides how an event is counted (names and descriptions aside)."""
    return (
        ev.fixed_counter,
        ev.event_code,
        ev.umask,
        ev.cmask,
        ev.inv,
        ev.edge,
        ev.any_thread,
        ev.umask_ext,
        ev.equal,
        ev.needs_msr,
        ev.counters,
    )


def _shown(ev: IntelEvent) -> str:
    """An encoding as `differences` prints it: Intel's short form plus what that form leaves out."""
    extra = []
    if ev.any_thread:
        extra.append("any")
    if ev.counters is not None:
        extra.append("counters " + ",".join(str(i) for i in range(ev.counters.bit_length()) if ev.counters >> i & 1))
    if ev.umask_ext or ev.equal or ev.needs_msr:
        extra.append("extra bits")
    return ",".join([ev.encoding, *extra])


def differences(builtin: Mapping[str, IntelEvent], table: Mapping[str, IntelEvent]) -> list[str]:
    """The built-in events a perfmon table encodes differently, one short line each (names it lacks: none)."""
    out = []
    for name, ev in builtin.items():
        other = table.get(name)
        if other is not None and _encoding(other) != _encoding(ev):
            out.append(f"{name}: built in {_shown(ev)}, table {_shown(other)}")
    return out
