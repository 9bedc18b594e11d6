"""One flat record per counted process (`"kind": "task"`) and per counted cgroup (`"kind": "cgroup"`) per
interval: JSON lines and CSV share these columns, and a replay rebuilds them from the recorded readings.

A reading pmutop may not count (`no_permission`) has null counts and values; a reading of the msr backend's
estimate (each core's counts split by the process's share of its busy time) says `"estimate": true`, so no
reader takes it for the process's own counters."""

from __future__ import annotations

from typing import Any

from pmutop.core.cpulist import format_cpu_list
from pmutop.core.task_reading import CgroupReading, TaskReading
from pmutop.derive.records import rounded

# Derived values of a process or cgroup, null where their inputs were not counted.
TASK_METRICS = ("util", "ghz", "ipc", "llc_mpki")


def _stamp(timestamps: bool) -> list[str]:
    return ["kind", "time", *(["timestamp"] if timestamps else []), "interval_index"]


def _values(events: list[str]) -> list[str]:
    return [*events, *(f"{k}_per_s" for k in events), *TASK_METRICS]


def task_columns(events: list[str], *, timestamps: bool = False) -> list[str]:
    """The task record's keys in order: CSV's header and JSON's keys are exactly these."""
    return [
        *_stamp(timestamps),
        "pid",
        "comm",
        "user",
        "cgroup",
        "threads",
        "cpus",
        "interval",
        *_values(events),
        "counted",
        "estimated",
        "estimate",
        "exited",
        "no_permission",
        "mode",
    ]


def cgroup_columns(events: list[str], *, timestamps: bool = False) -> list[str]:
    """The cgroup record's keys in order (CSV's header, JSON's keys)."""
    return [
        *_stamp(timestamps),
        "cgroup",
        "name",
        "processes",
        "interval",
        *_values(events),
        "counted",
        "estimated",
        "estimate",
        "no_permission",
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


def _measured(counts: dict[str, int], interval: float, events: list[str]) -> dict[str, Any]:
    """The raw deltas, their rates and the derived values (null where not counted)."""
    rec: dict[str, Any] = {k: counts.get(k) for k in events}
    rec |= {f"{k}_per_s": rounded(counts[k] / interval) if k in counts and interval > 0 else None for k in events}
    return rec | task_metrics(counts, interval)


def _head(kind: str, time: float, index: int, timestamp: str | None) -> dict[str, Any]:
    rec: dict[str, Any] = {"kind": kind, "time": round(time, 3)}
    if timestamp is not None:
        rec["timestamp"] = timestamp
    rec["interval_index"] = index
    return rec


def task_record(
    r: TaskReading,
    mode: str,
    events: list[str],
    *,
    time: float,
    index: int,
    timestamp: str | None = None,
) -> dict[str, Any]:
    """`mode`: the run's (the CPU records' "mode"); whether this reading is an estimate is `estimate`."""
    rec = _head("task", time, index, timestamp)
    rec |= {
        "pid": r.pid,
        "comm": r.comm,
        "user": r.user,
        "cgroup": r.cgroup,
        "threads": r.threads,
        "cpus": list(r.cpus),
        "interval": round(r.interval, 6),
    }
    rec |= _measured({} if r.no_permission else r.counts, r.interval, events)
    rec |= {
        "counted": None if r.no_permission else r.counted,
        "estimated": dict(r.estimated),
        "estimate": r.estimate,
        "exited": r.exited,
        "no_permission": r.no_permission,
        "mode": mode,
    }
    return rec


def cgroup_record(
    r: CgroupReading,
    mode: str,
    events: list[str],
    *,
    time: float,
    index: int,
    timestamp: str | None = None,
) -> dict[str, Any]:
    rec = _head("cgroup", time, index, timestamp)
    rec |= {"cgroup": r.path, "name": r.name, "processes": r.processes, "interval": round(r.interval, 6)}
    rec |= _measured({} if r.no_permission else r.counts, r.interval, events)
    rec |= {
        "counted": None if r.no_permission else r.counted,
        "estimated": dict(r.estimated),
        "estimate": r.estimate,
        "no_permission": r.no_permission,
        "mode": mode,
    }
    return rec


def csv_cells(rec: dict[str, Any]) -> dict[str, Any]:
    """A record's values as CSV cells: `estimated` as event=share;..., `cpus` as a CPU list (0-3,6), booleans
    as true/false (JSON's spelling)."""
    out = dict(rec)
    out["estimated"] = ";".join(f"{k}={v:.3g}" for k, v in rec["estimated"].items())
    if "cpus" in rec:
        out["cpus"] = format_cpu_list(rec["cpus"])
    for key, value in rec.items():
        if isinstance(value, bool):
            out[key] = "true" if value else "false"
    return out
