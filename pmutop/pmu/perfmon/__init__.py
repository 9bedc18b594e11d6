"""Intel event names from Intel's perfmon tables (github.com/intel/perfmon, BSD-3-Clause).

A perfmon directory holds `mapfile.csv` (which event files describe which CPU) and per-model JSON event
lists. pmutop reads only the core event files (EventType `core` / `hybridcore`) and only the fields a
PERFEVTSEL can express: event select, umask, cmask, inv, edge. Events that need anything more (an
offcore-response or load-latency MSR, extended umask bits, AnyThread, fixed counters pmutop does not
drive) are listed but refused with a one-line reason.

The modules, by job: intel_event (one JSON table parsed into IntelEvent), tables (mapfile.csv and the
directory: which tables describe which CPU), resolve (event names to the encodings pmutop programs),
download (`pmutop events --download`), table_check (what a downloaded table may hold) and safe_write
(writing it without following links). The names callers use are re-exported here.
"""

from pmutop.pmu.perfmon.download import DOWNLOAD_TIMEOUT, LICENSE, PERFMON_URL, check_source, download
from pmutop.pmu.perfmon.intel_event import IntelEvent, load_events
from pmutop.pmu.perfmon.resolve import NO_TABLES_HINT, AnyThreadSpec, Resolver, to_spec
from pmutop.pmu.perfmon.table_check import table_problem
from pmutop.pmu.perfmon.tables import (
    MAPFILE,
    PERFMON_ENV,
    MapRow,
    PerfmonTables,
    cache_dir,
    choose_rows,
    core_rows,
    cpuid_string,
    parse_mapfile,
)

__all__ = [
    "DOWNLOAD_TIMEOUT",
    "LICENSE",
    "MAPFILE",
    "NO_TABLES_HINT",
    "PERFMON_ENV",
    "PERFMON_URL",
    "AnyThreadSpec",
    "IntelEvent",
    "MapRow",
    "PerfmonTables",
    "Resolver",
    "cache_dir",
    "check_source",
    "choose_rows",
    "core_rows",
    "cpuid_string",
    "download",
    "load_events",
    "parse_mapfile",
    "table_problem",
    "to_spec",
]
