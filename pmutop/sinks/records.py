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


def columns(keys: list[str], *, timestamps: bool = False) -> list[str]:
    """The columns of a run counting `keys`, in order: CSV's header and JSON's keys are exactly these."""
    cols = [
        "time",
        *(["timestamp"] if timestamps else []),
        "interval_index",
        "cpu",
        "interval",
        *count_columns(keys),
        *rate_columns(keys),
        *METRIC_ORDER,
        "overflows",
        "estimated",
        "suspect",
        "mode",
    ]
    return list(dict.fromkeys(cols))  # once each: llc_misses_per_s is both a metric and an event's rate


def rounded(value: float) -> float:
    """Six decimals for ratios and small rates, three for large rates: well within what any counter
    resolves, and no float noise (0.38000000000016826)."""
    return round(value, 6 if abs(value) < 1000 else 3)


def record(
    s: Sample,
    mode: str,
    *,
    keys: list[str] | None = None,
    time: float | None = None,
    index: int | None = None,
    timestamp: str | None = None,
) -> dict[str, Any]:
    """time, cpu, interval, raw deltas and their rates (only those counted), derived metrics, overflows,
    estimated (event -> fraction of time counted, for multiplexed or rotated events), suspect, mode.

    With `keys` (the run's events) the record has exactly `columns(keys)`, null where a value is absent;
    `time`/`index` give every record of one interval the same time and interval number."""
    rec: dict[str, Any] = {"time": round(s.time if time is None else time, 3)}
    if timestamp is not None:
        rec["timestamp"] = timestamp
    if index is not None:
        rec["interval_index"] = index
    rec |= {"cpu": s.cpu, "interval": round(s.interval, 6)}
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
    rec["overflows"] = dict(s.overflows)
    rec["estimated"] = {k: round(v, 3) for k, v in s.estimated.items()}
    rec["suspect"] = s.suspect
    rec["mode"] = mode
    if keys is not None:
        rec = {c: rec.get(c) for c in columns(keys, timestamps=timestamp is not None)}
    return rec
