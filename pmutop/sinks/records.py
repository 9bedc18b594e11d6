"""One flat record per CPU per interval: the shape shared by JSON lines, CSV and the exporter."""

from __future__ import annotations

from typing import Any

from pmutop import topdown
from pmutop.engine.sample import Sample
from pmutop.metrics import CoreMetrics, for_sample

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
    """Counted events that are not inputs of the standard metrics (shown as their own rates)."""
    return [k for k in keys if k not in STANDARD_EVENTS]


def count_columns(keys: list[str]) -> list[str]:
    """Delta columns for a run counting `keys` (plus the TSC)."""
    present = set(keys) | {"tsc"}
    return [k for k in COUNT_ORDER if k in present] + [k for k in keys if k not in COUNT_ORDER]


def rate_columns(keys: list[str]) -> list[str]:
    """A per-second rate for every counted event."""
    return [f"{k}_per_s" for k in keys]


def record(s: Sample, mode: str) -> dict[str, Any]:
    """time, cpu, interval, raw deltas and their rates (only those counted), derived metrics, overflows,
    estimated (event -> fraction of time counted, for multiplexed or rotated events), suspect, mode."""
    rec: dict[str, Any] = {"time": round(s.time, 6), "cpu": s.cpu, "interval": round(s.interval, 6)}
    counts = dict(s.counts)
    if s.tsc is not None:
        counts["tsc"] = s.tsc
    for k in count_columns(list(s.counts)):
        if k in counts:
            rec[k] = counts[k]
    for k in s.counts:
        rec[f"{k}_per_s"] = None if s.suspect or not s.interval else s.counts[k] / s.interval
    metrics = for_sample(s).as_dict() | topdown.compute(s.topdown, s.counts)
    for k in METRIC_ORDER:
        rec[k] = None if s.suspect else metrics[k]
    rec["overflows"] = dict(s.overflows)
    rec["estimated"] = dict(s.estimated)
    rec["suspect"] = s.suspect
    rec["mode"] = mode
    return rec
