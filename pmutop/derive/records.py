"""One flat record per CPU per interval: the shape shared by JSON lines, CSV and the exporter."""

from __future__ import annotations

import re
from typing import Any

from pmutop.core.sample import Sample
from pmutop.derive import topdown
from pmutop.derive.metrics import CoreMetrics, for_sample

# Raw deltas in a stable order; other events (raw encodings) follow in the order they were asked for.
COUNT_ORDER = (
    "instructions",
    "cycles",
    "ref_cycles",
    "tsc",
    "llc_references",
    "llc_misses",
    "branches",
    "branch_misses",
)
# Derived values, then top-down fractions (null where top-down is not measured: see `pmutop info`).
METRIC_ORDER = tuple(CoreMetrics.__dataclass_fields__) + topdown.TMA_FIELDS
# Beside the counters (pmutop.probes.power; `pmutop info` says which sources this machine has). Watts and
# package temperature are on the package's first CPU only; `cstates` is an object in JSON and one
# cstate_<name> column per idle state in CSV (csv_columns). Every share (util, busy, idle states, ratios, top-down)
# is a fraction 0..1; `throttle` is a list of reasons (empty: measured, none), null where not measured.
POWER_ORDER = (
    "busy",
    "bzy_mhz",
    "temp_c",
    "throttle",
    "package",
    "pkg_temp_c",
    "pkg_watts",
    "core_watts",
    "dram_watts",
    "instructions_per_joule",
    "cstates",
    "power_source",
)
STANDARD_EVENTS = frozenset(COUNT_ORDER) - {"tsc"}  # the events the derived metrics are made of
SHORT_TITLES = {
    "context_switches": "Ctx sw/s",
    "cpu_migrations": "Migr/s",
    "page_faults": "Faults/s",
    "minor_faults": "MinFlt/s",
    "major_faults": "MajFlt/s",
    "cpu_clock": "CPU clk/s",
    "task_clock": "Task clk/s",
}


def rate_title(key: str) -> str:
    """A short column title for an event's per-second rate."""
    return SHORT_TITLES.get(key, (key[:11] if len(key) > 11 else key) + "/s")


def extra_events(keys: list[str]) -> list[str]:
    """Counted events that are not inputs of the standard metrics (shown as their own rates). Issue slots and
    their top-down categories are shown as the tma_* fractions instead."""
    return [k for k in keys if k not in STANDARD_EVENTS and not _topdown_slots(k)]


def _topdown_slots(key: str) -> bool:
    return key == "slots" or key.startswith("topdown_")


def count_columns(keys: list[str]) -> list[str]:
    """Delta columns for a run counting `keys` (plus the TSC)."""
    present = set(keys) | {"tsc"}
    return [k for k in COUNT_ORDER if k in present] + [k for k in keys if k not in COUNT_ORDER]


def rate_columns(keys: list[str]) -> list[str]:
    """A per-second rate for every counted event."""
    return [f"{k}_per_s" for k in keys]


def columns(keys: list[str], *, timestamps: bool = False, hosts: bool = False) -> list[str]:
    """The columns of a run counting `keys`, in order: CSV's header and JSON's keys are exactly these.
    `hosts`: a fleet's records (--prometheus, and its recordings) say which host (Prometheus' instance label)
    before `cpu`, the host's own CPU number; other runs have no `host` column."""
    cols = [
        "kind",  # "cpu"; per-process records are "task" (pmutop.derive.task_records)
        "time",
        *(["timestamp"] if timestamps else []),
        "interval_index",
        *(["host"] if hosts else []),
        "cpu",
        "interval",
        *count_columns(keys),
        *rate_columns(keys),
        *METRIC_ORDER,
        *POWER_ORDER,
        "overflows",
        "estimated",
        "suspect",
        "mode",
    ]
    return list(dict.fromkeys(cols))  # once each: llc_misses_per_s is both a metric and an event's rate


def cstate_column(name: str) -> str:
    """CSV column of an idle state (its residency as a fraction): cstate_C6, cstate_haltpoll_idle ("haltpoll idle")."""
    return "cstate_" + re.sub(r"[^A-Za-z0-9]+", "_", name).strip("_")


def csv_columns(cols: list[str], cstates: list[str]) -> list[str]:
    """`cols` with `cstates` replaced by one column per idle state (JSON keeps one `cstates` object)."""
    i = cols.index("cstates")
    return cols[:i] + list(dict.fromkeys(cstate_column(n) for n in cstates)) + cols[i + 1 :]


def power_fields(s: Sample, package_instructions: int | None = None) -> dict[str, Any]:
    """busy .. power_source of one sample; `package_instructions` (all the package's CPUs this interval)
    gives instructions per joule on the sample that carries the package's energy."""
    watts = {d: (j / s.interval if s.interval > 0 else None) for d, j in s.energy_j.items()}
    pkg_j = s.energy_j.get("package")
    ipj = package_instructions / pkg_j if package_instructions is not None and pkg_j else None
    return {
        "busy": _share(s.busy),
        "bzy_mhz": s.bzy_mhz,
        "temp_c": s.temp_c,
        "throttle": list(s.throttle) if "throttle" in s.power_src else None,  # []: measured, none
        "package": s.package,
        "pkg_temp_c": s.pkg_temp_c,
        "pkg_watts": _r(watts.get("package")),
        "core_watts": _r(watts.get("core")),
        "dram_watts": _r(watts.get("dram")),
        "instructions_per_joule": _r(ipj),
        "cstates": {name: _share(pct) for name, pct in s.cstates.items()},
        "power_source": dict(s.power_src),
    }


def _r(v: float | None) -> float | None:
    return None if v is None else rounded(v)


def _share(percent: float | None) -> float | None:
    """Samples carry turbostat's percentages; records carry every share as a fraction (as util)."""
    return None if percent is None else rounded(percent / 100)


def package_instructions(samples: list[Sample]) -> dict[int, int]:
    """Instructions retired per package in one interval (for instructions per joule)."""
    out: dict[int, int] = {}
    for s in samples:
        if s.package is not None and "instructions" in s.counts and not s.suspect:
            out[s.package] = out.get(s.package, 0) + s.counts["instructions"]
    return out


def rounded(value: float) -> float:
    """Six significant digits: well within what any counter resolves over an interval, and no float noise
    (0.38000000000016826, 3555114491.435)."""
    return float(f"{value:.6g}")


def record(
    s: Sample,
    mode: str,
    *,
    keys: list[str] | None = None,
    time: float | None = None,
    index: int | None = None,
    timestamp: str | None = None,
    pkg_instructions: int | None = None,
    host: tuple[str, int] | None = None,
) -> dict[str, Any]:
    """time, cpu, interval, raw deltas and their rates (only those counted), derived metrics, overflows,
    estimated (event -> fraction of time counted, for multiplexed or rotated events), suspect, mode.

    With `keys` (the run's events) the record has exactly `columns(keys)`, null where a value is absent;
    `time`/`index` give every record of one interval the same time and interval number; `host`: a fleet's
    sample's (instance, its CPU number), see `columns`."""
    rec: dict[str, Any] = {"kind": "cpu", "time": round(s.time if time is None else time, 3)}
    if timestamp is not None:
        rec["timestamp"] = timestamp
    if index is not None:
        rec["interval_index"] = index
    if host is not None:
        rec["host"] = host[0]
    # A failed sample (a fleet's CPU without samples this round) measured no interval: null, not 0.
    interval = None if s.error else round(s.interval, 6)
    rec |= {"cpu": s.cpu if host is None else host[1], "interval": interval}
    counts = dict(s.counts)
    if s.tsc is not None:
        counts["tsc"] = s.tsc
    for k in count_columns(list(s.counts)):
        if k in counts:
            rec[k] = counts[k]
    for k in s.counts:
        rec[f"{k}_per_s"] = None if s.suspect or not s.interval else rounded(s.counts[k] / s.interval)
    metrics = for_sample(s).as_dict() | topdown.compute(s.topdown, s.counts)
    for k in METRIC_ORDER:
        value = metrics[k]
        rec[k] = None if s.suspect or value is None else rounded(value)
    rec |= power_fields(s, pkg_instructions)
    rec["overflows"] = dict(s.overflows)
    rec["estimated"] = {k: round(v, 3) for k, v in s.estimated.items()}
    rec["suspect"] = s.suspect
    rec["mode"] = mode
    if keys is not None:
        rec = {c: rec.get(c) for c in columns(keys, timestamps=timestamp is not None, hosts=host is not None)}
    return rec
