"""`pmutop --batch`: one line per CPU per interval as a table, CSV or JSON lines."""

from __future__ import annotations

import csv
import io
import json
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import IO, Any

from pmutop.core.errors import HardwareError
from pmutop.core.feed import SampleFeed
from pmutop.core.heap_freeze import freeze_startup_heap
from pmutop.core.numfmt import fixed as _fmt
from pmutop.core.numfmt import si as _si
from pmutop.core.sample import Sample
from pmutop.derive import topdown
from pmutop.derive.metrics import CoreMetrics, for_sample
from pmutop.derive.records import (
    columns,
    cstate_column,
    csv_columns,
    extra_events,
    package_instructions,
    rate_title,
    record,
)


@dataclass(frozen=True)
class TableColumn:
    title: str
    width: int
    needs: tuple[str, ...]
    cell: Callable[[CoreMetrics, Sample], str]


TABLE_COLUMNS = (
    TableColumn("util%", 6, (), lambda m, s: _fmt(m.util, ".1f", 6, 100)),
    TableColumn("GHz", 5, ("cycles", "ref_cycles"), lambda m, s: _fmt(m.ghz, ".2f", 5)),
    TableColumn("IPC", 5, ("instructions", "cycles"), lambda m, s: _fmt(m.ipc, ".2f", 5)),
    TableColumn("LLCmiss/s", 9, ("llc_misses",), lambda m, s: _si(m.llc_misses_per_s, 9)),
    TableColumn("MPKI", 6, ("llc_misses", "instructions"), lambda m, s: _fmt(m.llc_mpki, ".2f", 6)),
    TableColumn("LLCmiss%", 8, ("llc_misses", "llc_references"), lambda m, s: _fmt(m.llc_miss_ratio, ".1f", 8, 100)),
    TableColumn("brmiss%", 7, ("branch_misses", "branches"), lambda m, s: _fmt(m.branch_miss_ratio, ".2f", 7, 100)),
)


def _rate_column(key: str) -> TableColumn:
    title = rate_title(key)
    width = max(9, len(title))

    def cell(m: CoreMetrics, s: Sample) -> str:
        value = s.counts.get(key)
        return _si(None if value is None or not s.interval else value / s.interval, width)

    return TableColumn(title, width, (key,), cell)


def _tma_column(field: str, title: str) -> TableColumn:
    def cell(m: CoreMetrics, s: Sample) -> str:
        return _fmt(topdown.compute(s.topdown, s.counts)[field], ".1f", 6, 100)

    return TableColumn(title, 6, (), cell)


TMA_TABLE_COLUMNS = tuple(
    _tma_column(f, t) for f, t in zip(topdown.LEVEL1, ("Ret%", "Bad%", "FE%", "BE%"), strict=True)
)


class TablePrinter:
    """Human-readable rows; the columns are those the counted events can fill."""

    def __init__(self, out: IO[str], keys: list[str], mode: str, tma: bool = False, timestamps: bool = False) -> None:
        self.out = out
        self.timestamps = timestamps
        self.simulated = mode == "SIMULATED"
        counted = set(keys)
        self.columns = [c for c in TABLE_COLUMNS if set(c.needs) <= counted]
        if tma:
            self.columns += TMA_TABLE_COLUMNS
        self.columns += [_rate_column(k) for k in extra_events(keys)]
        stamp = "timestamp".ljust(24) + " " if timestamps else ""
        titles = " ".join(f"{c.title:>{c.width}}" for c in self.columns)
        header = stamp + f"{'time':>8} {'cpu':>4} " + titles + "  flags"
        print(header + ("  SIMULATED" if self.simulated else ""), file=out)

    def write(
        self, s: Sample, *, time: float, index: int, timestamp: str | None = None, pkg_instructions: int | None = None
    ) -> None:
        m = for_sample(s)
        flags = []
        if s.overflows:
            flags.append("ovf:" + ",".join(s.overflows))
        if s.estimated:
            flags.append(f"est:{min(s.estimated.values()):.0%}")
        if s.suspect:
            flags.append("SUSPECT")
            cells = " ".join("?".rjust(c.width) for c in self.columns)
        else:
            cells = " ".join(c.cell(m, s) for c in self.columns)
        line = (f"{timestamp} " if timestamp else "") + f"{time:8.2f} {s.cpu:>4} {cells}  {' '.join(flags) or '-'}"
        print(line + ("  SIMULATED" if self.simulated else ""), file=self.out)


class CsvPrinter:
    def __init__(self, out: IO[str], keys: list[str], mode: str, tma: bool = False, timestamps: bool = False) -> None:
        self.mode = mode
        self.keys = keys
        self.timestamps = timestamps
        self.columns: list[str] | None = None  # known at the first interval: its idle states name columns
        self.writer = csv.writer(out, lineterminator="\n")

    def begin(self, batch: list[Sample]) -> None:
        if self.columns is None:
            names = [n for s in batch for n in s.cstates]
            self.columns = csv_columns(columns(self.keys, timestamps=self.timestamps), names)
            self.writer.writerow(self.columns)

    def write(self, s: Sample, **at: Any) -> None:
        if self.columns is None:
            self.begin([s])
        assert self.columns is not None
        rec = record(s, self.mode, keys=self.keys, **at)
        rec["overflows"] = ";".join(f"{k}={v}" for k, v in rec["overflows"].items())
        rec["estimated"] = ";".join(f"{k}={v:.3g}" for k, v in rec["estimated"].items())
        rec["power_source"] = ";".join(f"{k}={v}" for k, v in rec["power_source"].items())
        if rec["throttle"] is not None:
            rec["throttle"] = ";".join(rec["throttle"])
        for name, share in rec.pop("cstates").items():
            rec[cstate_column(name)] = share
        self.writer.writerow(["" if rec.get(c) is None else rec[c] for c in self.columns])


class JsonPrinter:
    def __init__(self, out: IO[str], keys: list[str], mode: str, tma: bool = False, timestamps: bool = False) -> None:
        self.out = out
        self.mode = mode
        self.keys = keys

    def write(self, s: Sample, **at: Any) -> None:
        print(json.dumps(record(s, self.mode, keys=self.keys, **at), separators=(",", ":")), file=self.out)


def _timestamp(seconds: float) -> str:
    """ISO 8601 in UTC with milliseconds: sorts as text, and says which zone."""
    return datetime.fromtimestamp(seconds, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


PRINTERS: dict[str, Any] = {"table": TablePrinter, "csv": CsvPrinter, "json": JsonPrinter}


def run_batch(
    feed: SampleFeed,
    fmt: str,
    count: int | None,
    mode: str,
    out: IO[str] | None = None,
    warn: Callable[[str], None] | None = None,
    stop: threading.Event | None = None,
    timestamps: bool = False,
    pace: Callable[[], bool] | None = None,
) -> dict[int, str]:
    """Print `count` intervals (forever when None, or until `stop` is set). The engine must be started;
    the caller stops it. A CPU whose sampler fails is reported once and dropped; the others go on.
    Returns the CPUs that failed (cpu -> why); raises only when every CPU has failed.

    `pace`: for an unthreaded engine, takes the next interval's samples (Engine.tick_on_schedule); False
    ends the run (stopping)."""
    out = out or sys.stdout
    keys = feed.keys(feed.cpus[0])
    tma = any(feed.topdown_method(cpu) for cpu in feed.cpus)
    # The printers write into this buffer; each interval reaches `out` in one write (not one per line).
    buf = io.StringIO()
    printer = PRINTERS[fmt](buf, keys, mode, tma, timestamps)
    _drain(buf, out)
    # Wall-clock time of the engine's start, for absolute timestamps.
    wall0 = time.time() - feed.elapsed()
    seen = {cpu: 0 for cpu in feed.cpus}
    warned: set[tuple[int, str]] = set()
    failed: dict[int, str] = {}
    done = 0
    stopped = stop.is_set if stop is not None else (lambda: False)
    while (count is None or done < count) and not stopped():
        if pace is not None:
            if not pace():  # it took every live CPU's sample (or its failure): nothing to wait for
                break
        else:
            live = {c: n for c, n in seen.items() if c not in failed}
            if not feed.wait_for_samples(live, timeout=feed.interval * 3 + 10, stop=stop):
                if stopped():
                    break
                raise HardwareError(f"no samples arrived for {feed.interval * 3 + 10:.0f} s")
        for cpu, why in feed.failures().items():
            if cpu not in failed:
                failed[cpu] = why
                if warn:
                    warn(f"cpu {cpu} dropped: {why}")
        if len(failed) == len(feed.cpus):
            raise HardwareError(next(iter(failed.values())))
        batch = []
        for cpu in feed.cpus:
            if cpu in failed:
                continue
            s = feed.rings[cpu].since(seen[cpu])[0]
            seen[cpu] = s.seq
            batch.append(s)
        print_interval(printer, batch, done + 1, wall0 if timestamps else None, warn, warned)
        _drain(buf, out)
        out.flush()
        done += 1
        if done == 1:
            freeze_startup_heap()
    return failed


def print_interval(
    printer: Any,
    batch: list[Sample],
    index: int,
    wall0: float | None,
    warn: Callable[[str], None] | None,
    warned: set[tuple[int, str]],
) -> None:
    """One interval's records (live batch and replay --batch alike): a warning per new suspect sample, then
    every record stamped with one time, when its last CPU was read (`wall0`: the start's wall-clock time,
    for absolute timestamps)."""
    for s in batch:
        if s.suspect and warn and (s.cpu, s.suspect) not in warned:
            warned.add((s.cpu, s.suspect))
            warn(f"cpu {s.cpu}: suspect sample at {s.time:.2f} s: {s.suspect}")
    at = max(s.time for s in batch)
    stamp = _timestamp(wall0 + at) if wall0 is not None else None
    if hasattr(printer, "begin"):
        printer.begin(batch)
    per_package = package_instructions(batch)
    for s in batch:
        pkg = per_package.get(s.package) if s.energy_j and s.package is not None else None
        printer.write(s, time=at, index=index, timestamp=stamp, pkg_instructions=pkg)


def _drain(buf: io.StringIO, out: IO[str]) -> None:
    """Move what the printer wrote into `buf` to `out`, in one write."""
    text = buf.getvalue()
    if text:
        out.write(text)
        buf.seek(0)
        buf.truncate()
