"""`--batch --pid`: the task records (one per counted process per interval) as JSON lines, CSV or a table."""

from __future__ import annotations

import csv
import json
from typing import IO, Any

from pmutop.core.numfmt import fixed as _fmt
from pmutop.core.numfmt import si as _si
from pmutop.core.task_reading import ESTIMATED, TaskReading
from pmutop.derive.task_records import task_columns, task_metrics, task_record


def _mode(r: TaskReading, mode: str) -> str:
    """An estimated row (msr backend: its share of its cores' counts) says so in its own record."""
    return ESTIMATED if r.estimate else mode


class TaskJsonPrinter:
    def __init__(self, out: IO[str], events: list[str], mode: str, timestamps: bool = False) -> None:
        self.out, self.events, self.mode = out, events, mode

    def write(self, r: TaskReading, **at: Any) -> None:
        print(json.dumps(task_record(r, _mode(r, self.mode), self.events, **at), separators=(",", ":")), file=self.out)


class TaskCsvPrinter:
    """The JSON record's columns, each once; `estimated` as event=share;... ."""

    def __init__(self, out: IO[str], events: list[str], mode: str, timestamps: bool = False) -> None:
        self.mode, self.events = mode, events
        self.columns = task_columns(events, timestamps=timestamps)
        self.writer = csv.writer(out, lineterminator="\n")
        self.writer.writerow(self.columns)

    def write(self, r: TaskReading, **at: Any) -> None:
        rec = task_record(r, _mode(r, self.mode), self.events, **at)
        rec["estimated"] = ";".join(f"{k}={v:.3g}" for k, v in rec["estimated"].items())
        rec["exited"] = "true" if rec["exited"] else "false"
        self.writer.writerow(["" if rec.get(c) is None else rec[c] for c in self.columns])


# (title, width, value key, cell): the live per-core table's formats for the same quantities.
_TABLE = (
    ("CPU%", 6, "util", lambda v, w: _fmt(None if v is None else 100 * v, ".1f", w)),
    ("GHz", 5, "ghz", lambda v, w: _fmt(v, ".2f", w)),
    ("IPC", 5, "ipc", lambda v, w: _fmt(v, ".2f", w)),
    ("LLC miss/s", 10, "llc_misses_per_s", _si),
    ("Br miss/s", 9, "branch_misses_per_s", _si),
    ("Ctx sw/s", 9, "context_switches_per_s", _si),
    ("Counted%", 8, "counted", lambda v, w: _fmt(v, ".0f", w, 100)),
)


class TaskTablePrinter:
    """Human-readable process rows; columns for the hardware events only when they are counted."""

    def __init__(self, out: IO[str], events: list[str], mode: str, timestamps: bool = False) -> None:
        self.out, self.events, self.mode = out, events, mode
        counted = {f"{e}_per_s" for e in events} | {"util", "counted", "context_switches_per_s"}
        needs = {"ghz": "cycles", "ipc": "instructions"}
        self.columns = [c for c in _TABLE if c[2] in counted or needs.get(c[2]) in events]
        stamp = "timestamp".ljust(24) + " " if timestamps else ""
        header = stamp + f"{'time':>8} {'PID':>7} {'COMMAND':<16} {'USER':<10} {'Thr':>4} "
        print(header + " ".join(f"{t:>{w}}" for t, w, _, _ in self.columns) + "  flags", file=self.out)

    def write(self, r: TaskReading, *, time: float, index: int, timestamp: str | None = None) -> None:
        values: dict[str, float | None] = dict(task_metrics(r.counts, r.interval))
        values |= {f"{k}_per_s": (v / r.interval if r.interval > 0 else None) for k, v in r.counts.items()}
        values["counted"] = r.counted
        cells = " ".join(cell(values.get(key), w) for _, w, key, cell in self.columns)
        flags = [f"est:{min(r.estimated.values()):.0%}"] if r.estimated else []
        if r.estimate:
            flags.append("est.")
        if r.no_permission:
            flags.append("no-permission")
        if r.exited:
            flags.append("exited")
        line = (f"{timestamp} " if timestamp else "") + f"{time:8.2f} {r.pid:>7} {r.comm[:16]:<16} "
        line += f"{r.user[:10]:<10} {r.threads:>4} {cells}  {' '.join(flags) or '-'}"
        print(line, file=self.out)


TASK_PRINTERS: dict[str, Any] = {"table": TaskTablePrinter, "csv": TaskCsvPrinter, "json": TaskJsonPrinter}
