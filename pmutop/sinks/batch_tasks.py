"""`--batch` with per-process or per-cgroup counters: the task records (one per counted process per interval) and
the cgroup records (one per counted cgroup) as JSON lines, CSV or a table. JSON prints every kind asked for
(each interval: its CPU records, then its task records, then its cgroup records); CSV and the table print one
kind, since each kind has its own columns."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterable
from typing import IO, Any

from pmutop.core.cpulist import format_cpu_list
from pmutop.core.numfmt import fixed as _fmt
from pmutop.core.numfmt import si as _si
from pmutop.core.task_reading import CgroupReading, TaskReading, TaskSnapshot
from pmutop.derive.task_records import (
    cgroup_columns,
    cgroup_record,
    csv_cells,
    task_columns,
    task_metrics,
    task_record,
)


class TaskJsonPrinter:
    def __init__(self, out: IO[str], events: list[str], mode: str, timestamps: bool = False) -> None:
        self.out, self.events, self.mode = out, events, mode

    def write(self, r: TaskReading, **at: Any) -> None:
        print(json.dumps(task_record(r, self.mode, self.events, **at), separators=(",", ":")), file=self.out)


class CgroupJsonPrinter(TaskJsonPrinter):
    def write(self, r: CgroupReading, **at: Any) -> None:  # type: ignore[override]
        print(json.dumps(cgroup_record(r, self.mode, self.events, **at), separators=(",", ":")), file=self.out)


class TaskCsvPrinter:
    """The JSON record's columns, each once (csv_cells says how lists and objects are spelled)."""

    columns_of = staticmethod(task_columns)
    record_of: Callable[..., dict[str, Any]] = staticmethod(task_record)

    def __init__(self, out: IO[str], events: list[str], mode: str, timestamps: bool = False) -> None:
        self.mode, self.events = mode, events
        self.columns = self.columns_of(events, timestamps=timestamps)
        self.writer = csv.writer(out, lineterminator="\n")
        self.writer.writerow(self.columns)

    def write(self, r: Any, **at: Any) -> None:
        rec = csv_cells(self.record_of(r, self.mode, self.events, **at))
        self.writer.writerow(["" if rec.get(c) is None else rec[c] for c in self.columns])


class CgroupCsvPrinter(TaskCsvPrinter):
    columns_of = staticmethod(cgroup_columns)
    record_of = staticmethod(cgroup_record)


# (title, width, value key, cell): the live per-core table's formats for the same quantities.
_TABLE = (
    ("CPU%", 6, "util", lambda v, w: _fmt(None if v is None else 100 * v, ".1f", w)),
    ("GHz", 5, "ghz", lambda v, w: _fmt(v, ".2f", w)),
    ("IPC", 5, "ipc", lambda v, w: _fmt(v, ".2f", w)),
    ("LLC miss/s", 10, "llc_misses_per_s", _si),
    ("LLC MPKI", 8, "llc_mpki", lambda v, w: _fmt(v, ".2f", w)),
    ("Br miss/s", 9, "branch_misses_per_s", _si),
    ("Ctx sw/s", 9, "context_switches_per_s", _si),
    ("Counted%", 8, "counted", lambda v, w: _fmt(v, ".0f", w, 100)),
)
_NEEDS = {"ghz": ("cycles",), "ipc": ("instructions",), "llc_mpki": ("llc_misses", "instructions")}


def _table_columns(events: list[str]) -> list[tuple[str, int, str, Callable[[float | None, int], str]]]:
    """The columns the counted events can fill (the hardware ones only where the PMU has them)."""
    counted = {f"{e}_per_s" for e in events} | {"util", "counted", "context_switches_per_s"}
    return [c for c in _TABLE if c[2] in counted or (c[2] in _NEEDS and set(_NEEDS[c[2]]) <= set(events))]


def _cells(columns: list[Any], counts: dict[str, int], interval: float, counted: float, unknown: bool) -> str:
    if unknown:  # not counted (no permission): no number at all, never a zero
        return " ".join("-".rjust(w) for _, w, _, _ in columns)
    values: dict[str, float | None] = dict(task_metrics(counts, interval))
    values |= {f"{k}_per_s": (v / interval if interval > 0 else None) for k, v in counts.items()}
    values["counted"] = counted
    return " ".join(cell(values.get(key), w) for _, w, key, cell in columns)


def _flags(estimated: dict[str, float], estimate: bool, no_permission: bool, exited: bool = False) -> str:
    flags = ["no-permission"] if no_permission else []
    if estimate:
        flags.append("est.")  # the process's share of its cores' counts, not its own counters
    if estimated:
        flags.append(f"est:{min(estimated.values()):.0%}")  # multiplexed: scaled from part of the interval
    if exited:
        flags.append("exited")
    return " ".join(flags) or "-"


class TaskTablePrinter:
    """Human-readable process rows; columns for the hardware events only when they are counted."""

    def __init__(self, out: IO[str], events: list[str], mode: str, timestamps: bool = False) -> None:
        self.out, self.events, self.mode = out, events, mode
        self.columns = _table_columns(events)
        stamp = "timestamp".ljust(24) + " " if timestamps else ""
        header = stamp + f"{'time':>8} {'PID':>7} {'COMMAND':<16} {'USER':<10} {'Thr':>4} "
        print(header + " ".join(f"{t:>{w}}" for t, w, _, _ in self.columns) + f" {'CPUs':<7} flags", file=self.out)

    def write(self, r: TaskReading, *, time: float, index: int, timestamp: str | None = None) -> None:
        cells = _cells(self.columns, r.counts, r.interval, r.counted, r.no_permission)
        line = (f"{timestamp} " if timestamp else "") + f"{time:8.2f} {r.pid:>7} {r.comm[:16]:<16} "
        line += f"{r.user[:10]:<10} {r.threads:>4} {cells} {format_cpu_list(list(r.cpus)) or '-':<7} "
        print(line + _flags(r.estimated, r.estimate, r.no_permission, r.exited), file=self.out)


NAME_WIDTH = 28


def tree_order(cgroups: Iterable[CgroupReading]) -> list[tuple[int, CgroupReading]]:
    """(depth below the shallowest shown, reading), each parent before its children (sorted by path component,
    so /a/b follows /a, not /a-b)."""
    ordered = sorted(cgroups, key=lambda c: [p for p in c.path.split("/") if p])
    depths = [len([p for p in c.path.split("/") if p]) for c in ordered]
    top = min(depths, default=0)
    return [(d - top, c) for d, c in zip(depths, ordered, strict=True)]


class CgroupTablePrinter:
    """One row per cgroup, as a tree: a child indented under its parent (a parent's counts include its
    children's: the kernel's cgroup events are hierarchical)."""

    def __init__(self, out: IO[str], events: list[str], mode: str, timestamps: bool = False) -> None:
        self.out, self.events, self.mode = out, events, mode
        self.columns = _table_columns(events)
        stamp = "timestamp".ljust(24) + " " if timestamps else ""
        header = stamp + f"{'time':>8} {'CGROUP':<{NAME_WIDTH}} {'Procs':>5} "
        print(header + " ".join(f"{t:>{w}}" for t, w, _, _ in self.columns) + "  flags", file=self.out)

    def write_all(self, cgroups: Iterable[CgroupReading], **at: Any) -> None:
        for depth, r in tree_order(cgroups):
            self.write(r, depth=depth, **at)

    def write(self, r: CgroupReading, *, time: float, index: int, timestamp: str | None = None, depth: int = 0) -> None:
        name = ("  " * depth + (r.name or r.path))[:NAME_WIDTH]
        cells = _cells(self.columns, r.counts, r.interval, r.counted, r.no_permission)
        line = (f"{timestamp} " if timestamp else "") + f"{time:8.2f} {name:<{NAME_WIDTH}} {r.processes:>5} "
        print(line + f"{cells}  " + _flags(r.estimated, r.estimate, r.no_permission), file=self.out)


TASK_PRINTERS: dict[str, Any] = {"table": TaskTablePrinter, "csv": TaskCsvPrinter, "json": TaskJsonPrinter}
CGROUP_PRINTERS: dict[str, Any] = {"table": CgroupTablePrinter, "csv": CgroupCsvPrinter, "json": CgroupJsonPrinter}


class SnapshotPrinter:
    """One interval's task and cgroup records in one format, for the live batch and `replay --batch` alike.
    `records`: "task", "cgroup" or "all" (every kind: JSON only); "cpu" prints nothing here. The snapshot's
    notes ("counters on 20 of 32 processes", how an estimate was made) go to `warn` once per kind (the text
    before its first ':')."""

    def __init__(
        self,
        out: IO[str],
        fmt: str,
        events: list[str],
        mode: str,
        records: str,
        timestamps: bool = False,
        warn: Callable[[str], None] | None = None,
    ) -> None:
        self.tasks = TASK_PRINTERS[fmt](out, events, mode, timestamps) if records in ("task", "all") else None
        self.cgroups = CGROUP_PRINTERS[fmt](out, events, mode, timestamps) if records in ("cgroup", "all") else None
        self.warn = warn
        self._said: set[str] = set()

    def write(self, snapshot: TaskSnapshot, *, time: float, index: int, timestamp: str | None = None) -> None:
        for note in snapshot.notes:
            kind = note.split(":", 1)[0]  # once per kind: an estimate's share changes every interval
            if kind not in self._said and self.warn is not None:
                self._said.add(kind)
                self.warn(note)
        at: dict[str, Any] = {"time": time, "index": index, "timestamp": timestamp}
        if self.tasks is not None:
            for r in snapshot.tasks:
                self.tasks.write(r, **at)
        if self.cgroups is None:
            return
        if isinstance(self.cgroups, CgroupTablePrinter):
            self.cgroups.write_all(snapshot.cgroups, **at)
        else:
            for c in snapshot.cgroups:
                self.cgroups.write(c, **at)
