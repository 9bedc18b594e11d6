"""One flat record per counted process per interval (`"kind": "task"`): JSON lines and CSV share these columns."""

from __future__ import annotations

from typing import Any

from pmutop.core.task_reading import TaskReading
from pmutop.derive.records import rounded

# Derived values of a process, null where their inputs were not counted.
TASK_METRICS = ("util", "ghz", "ipc", "llc_mpki")


def task_columns(events: list[str], *, timestamps: bool = False) -> list[str]:
    """The task record's keys in order: CSV's header and JSON's keys are exactly these."""
    return [
        "kind",
        "time",
        *(["timestamp"] if timestamps else []),
        "interval_index",
        "pid",
        "comm",
        "user",
        "threads",
        "interval",
        *events,
        *(f"{k}_per_s" for k in events),
        *TASK_METRICS,
        "counted",
        "estimated",
        "exited",
        "mode",
    ]


def task_metrics(counts: dict[str, int], interval: float) -> dict[str, float | None]:
    """util = task_clock / interval, a fraction of one CPU like every share (2.0: two busy threads);
    ghz = cycles / task_clock; ipc = instructions / cycles; llc_mpki = 1000 × llc_misses / instructions."""

    def ratio(num: str, den: str, scale: float = 1.0) -> float | None:
        if num not in counts or den not in counts or not counts[den]:
            return None
        return rounded(scale * counts[num] / counts[den])

    clock = counts.get("task_clock")
    return {
        "util": rounded(clock / 1e9 / interval) if clock is not None and interval > 0 else None,
        "ghz": ratio("cycles", "task_clock"),  # cycles per ns of running time = GHz
        "ipc": ratio("instructions", "cycles"),
        "llc_mpki": ratio("llc_misses", "instructions", 1000),
    }


def task_record(
    r: TaskReading,
    mode: str,
    events: list[str],
    *,
    time: float,
    index: int,
    timestamp: str | None = None,
) -> dict[str, Any]:
    rec: dict[str, Any] = {"kind": "task", "time": round(time, 3)}
    if timestamp is not None:
        rec["timestamp"] = timestamp
    rec |= {
        "interval_index": index,
        "pid": r.pid,
        "comm": r.comm,
        "user": r.user,
        "threads": r.threads,
        "interval": round(r.interval, 6),
    }
    rec |= {k: r.counts.get(k) for k in events}
    rec |= {
        f"{k}_per_s": rounded(r.counts[k] / r.interval) if k in r.counts and r.interval > 0 else None for k in events
    }
    rec |= task_metrics(r.counts, r.interval)
    rec |= {"counted": r.counted, "estimated": dict(r.estimated), "exited": r.exited, "mode": mode}
    return rec
