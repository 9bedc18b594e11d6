"""`pmutop --batch`: one line per CPU per interval as a table, CSV or JSON lines."""

from __future__ import annotations

import csv
import io
import json
import sys
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import IO, Any

from pmutop.core.dram_reading import PackageDram
from pmutop.core.errors import HardwareError
from pmutop.core.feed import SampleFeed
from pmutop.core.heap_freeze import freeze_startup_heap
from pmutop.core.numfmt import fixed_cell
from pmutop.core.numfmt import si as _si
from pmutop.core.sample import Sample
from pmutop.core.task_reading import TaskCounterSource, TaskSnapshot
from pmutop.derive import power, titles, topdown
from pmutop.derive.metrics import CoreMetrics, combined, for_sample, utilisation
from pmutop.derive.power import combined_power, power_values
from pmutop.derive.records import (
    columns,
    cstate_column,
    csv_columns,
    package_instructions,
    rate_title,
    record,
)
from pmutop.engine.package_sampler import PackageSampler


@dataclass(frozen=True)
class TableColumn:
    key: str  # what the row gives it: a metric column, a tma_* field, a power field or "ev:<event>"
    title: str
    width: int
    cell: Callable[[float | None, int], str]  # (value, width) -> the right-aligned text


# The live view's formats (pmutop.tui.columns) for the same columns.
_CELLS: dict[str, Callable[[float | None, int], str]] = {
    "util": fixed_cell(".1f", 100),
    "ghz": fixed_cell(".2f"),
    "ipc": fixed_cell(".2f"),
    "llc_per_s": _si,
    "mpki": fixed_cell(".2f"),
    "llc_ratio": fixed_cell(".1f", 100),
    "br_ratio": fixed_cell(".2f", 100),
    "busy": fixed_cell(".0f"),
    "bzy_mhz": fixed_cell(".0f"),
    "temp_c": fixed_cell(".0f"),
    "pkg_watts": fixed_cell(".1f"),
}
_MIN_WIDTHS = {"util": 6, "ghz": 5, "ipc": 5, "mpki": 6, "busy": 6, "bzy_mhz": 6, "temp_c": 4, "pkg_watts": 6}
_TMA_TITLES = dict(zip(topdown.LEVEL1, ("Ret%", "Bad%", "FE%", "BE%"), strict=True))
_CPU_WIDTH = 4
Hosts = dict[int, tuple[str, int]]  # a fleet's cpu id -> (host, its own CPU number): records say both
# Where a table column's value comes from (TablePrinter._values fetches only what its columns show).
_METRIC, _TMA, _POWER, _RATE, _UTIL = range(5)


def _column(key: str, title: str, cell: Callable[[float | None, int], str], min_width: int = 0) -> TableColumn:
    return TableColumn(key, title, max(min_width, len(title)), cell)


class _Printer:
    """What the three formats share: where they write, the run's events and mode, and a fleet's hosts (a fleet's
    cpu ids, each record naming its host and that host's own CPU number)."""

    def __init__(
        self,
        out: IO[str],
        keys: list[str],
        mode: str,
        tma: bool = False,
        timestamps: bool = False,
        hosts: Hosts | None = None,
    ) -> None:
        self.out = out
        self.keys = keys
        self.mode = mode
        self.tma = tma
        self.timestamps = timestamps
        self.hosts = hosts or None

    def host(self, cpu: int) -> tuple[str, int] | None:
        return self.hosts.get(cpu) if self.hosts else None


class TablePrinter(_Printer):
    """Human-readable rows with the live view's column titles; the columns are those the counted events can
    fill, the power columns some source measures, and a rate for every event no other column shows. With more
    than one CPU each interval ends with the `all` row, the machine total as the live view's."""

    def __init__(
        self,
        out: IO[str],
        keys: list[str],
        mode: str,
        tma: bool = False,
        timestamps: bool = False,
        hosts: Hosts | None = None,
    ) -> None:
        super().__init__(out, keys, mode, tma, timestamps, hosts)
        self.simulated = mode == "SIMULATED"
        self.suffix = "  SIMULATED\n" if self.simulated else "\n"
        # A fleet's rows are "host:cpu" (the live view's row names), in a column wide enough for them.
        self.names = {gid: f"{host}:{cpu}" for gid, (host, cpu) in hosts.items()} if hosts else {}
        self.cpu_width = max([_CPU_WIDTH, *(len(n) for n in self.names.values())])
        self.columns: list[TableColumn] | None = None  # known at the first interval: power needs a sample
        # Per column, where its value comes from: (source, key, cell, width); and what a row must compute.
        self._plan: list[tuple[int, str, Callable[[float | None, int], str], int]] = []
        self._needs: set[int] = set()
        self._rated: list[str] = []  # the events shown as their own rate
        self._unknown = ""  # the cells of a row whose values must not be shown

    def begin(self, batch: list[Sample], power_fields: Collection[str] | None = None) -> None:
        """Choose the columns and print the header, once: the power columns are `power_fields` (what the run
        measures), else all of them when the first interval's samples carry any (an empty batch: none)."""
        if self.columns is not None:
            return
        shown = titles.metric_columns(self.keys)
        cols = [_column(c, titles.TITLES[c], _CELLS[c], _MIN_WIDTHS.get(c, 0)) for c in shown]
        plan = [(_METRIC, titles.METRIC_OF[c]) for c in shown]
        if shown == ["util"]:
            # Util% alone (software events): no row computes the other metrics only to drop them.
            plan = [(_UTIL, "util")]
        if self.tma:
            cols += [_column(f, t, fixed_cell(".1f", 100), 6) for f, t in _TMA_TITLES.items()]
            plan += [(_TMA, f) for f in _TMA_TITLES]
        # From samples: all the power columns when the run measured any (as a live run that reads power names
        # them all before its first interval), so a replay prints the live run's header.
        carried = any(v is not None for s in batch for v in power_values(s).values())
        measured = set(power_fields) if power_fields is not None else set(power.SERIES) if carried else set()
        powered = [k for k in power.SERIES if k in measured]
        cols += [_column(k, titles.TITLES[k], _CELLS[k], _MIN_WIDTHS.get(k, 0)) for k in powered]
        plan += [(_POWER, k) for k in powered]
        rated = titles.rate_events(self.keys, shown)
        cols += [_column(f"ev:{k}", rate_title(k), _si, 9) for k in rated]
        plan += [(_RATE, k) for k in rated]
        self.columns = cols
        self._plan = [(source, key, c.cell, c.width) for (source, key), c in zip(plan, cols, strict=True)]
        self._needs = {source for source, _ in plan}
        self._rated = rated
        self._unknown = " ".join("?".rjust(c.width) for c in cols)
        stamp = "timestamp".ljust(24) + " " if self.timestamps else ""
        header = stamp + f"{'time':>8} {'host:cpu' if self.names else titles.TITLES['cpu']:>{self.cpu_width}} "
        header += " ".join(f"{c.title:>{c.width}}" for c in cols) + "  flags"
        self.out.write(header + self.suffix)

    def write(
        self, s: Sample, *, time: float, index: int, timestamp: str | None = None, pkg_instructions: int | None = None
    ) -> None:
        if self.columns is None:
            self.begin([s])
        flags = []
        if s.overflows:
            flags.append("ovf:" + ",".join(s.overflows))
        if s.estimated:
            flags.append(f"est:{min(s.estimated.values()):.0%}")
        if s.suspect:
            flags.append("SUSPECT")
            cells = self._unknown
        else:
            needs = self._needs
            rates: dict[str, float | None] | None = None
            if _RATE in needs:
                # Only the events shown as rates (a loop: no comprehension to run every row).
                rates = {}
                interval, counts = s.interval, s.counts
                if interval:
                    for k in self._rated:
                        if k in counts:
                            rates[k] = counts[k] / interval
            cells = self._cells(
                for_sample(s) if _METRIC in needs else None,
                topdown.compute(s.topdown, s.counts) if _TMA in needs else None,
                power_values(s) if _POWER in needs else None,
                rates,
                utilisation(s.counts, s.tsc, s.util) if _UTIL in needs else None,
            )
        self._line(self.names.get(s.cpu, str(s.cpu)), cells, time, timestamp, flags)

    def write_total(self, batch: list[Sample], *, time: float, timestamp: str | None = None) -> None:
        """The `all` row: the live view's machine total of this interval (suspect samples left out)."""
        ok = []
        least: float | None = None  # the smallest share any event of them was counted
        utils = []  # the kernel's busy fractions, and whether any sample counted reference cycles
        ref_cycles = False
        for s in batch:
            if not (s.error or s.suspect):
                ok.append(s)
                if s.estimated:
                    share = min(s.estimated.values())
                    least = share if least is None else min(least, share)
                if s.util is not None:
                    utils.append(s.util)
                ref_cycles = ref_cycles or "ref_cycles" in s.counts
        flags = [f"est:{least:.0%}"] if least is not None else []
        left_out = len(batch) - len(ok)
        if left_out:
            flags.append(f"{left_out} left out")
        if not ok:
            self._line("all", self._unknown, time, timestamp, flags)
            return
        needs = self._needs
        rates: dict[str, float | None] | None = None
        if _RATE in needs:
            rates = {}
            for s in ok:
                if s.interval > 0:
                    for k, v in s.counts.items():
                        rates[k] = (rates.get(k) or 0.0) + v / s.interval
        util = None
        if _UTIL in needs:
            if ref_cycles:
                util = combined(ok).util
            elif utils:  # combined()'s util without reference cycles: the mean of the kernel's busy fractions
                util = sum(utils) / len(utils)
        cells = self._cells(
            combined(ok) if _METRIC in needs else None,
            topdown.combine((s.topdown, s.counts) for s in ok) if _TMA in needs else None,
            combined_power(ok) if _POWER in needs else None,
            rates,
            util,
        )
        self._line("all", cells, time, timestamp, flags)

    def _cells(
        self,
        metrics: CoreMetrics | None,
        tma: dict[str, float | None] | None,
        power: dict[str, float | None] | None,
        rates: dict[str, float | None] | None,
        util: float | None,
    ) -> str:
        """One row's cells, each from the source its column names (only the sources shown were computed)."""
        out = []
        for source, key, cell, width in self._plan:
            if source == _UTIL:
                value = util
            elif source == _METRIC:
                value = getattr(metrics, key)
            elif source == _TMA:
                value = tma.get(key)  # type: ignore[union-attr]
            elif source == _POWER:
                value = power[key]  # type: ignore[index]
            else:
                value = rates.get(key)  # type: ignore[union-attr]
            out.append(cell(value, width))
        return " ".join(out)

    def _line(self, label: str, cells: str, time: float, timestamp: str | None, flags: list[str]) -> None:
        line = (f"{timestamp} " if timestamp else "") + f"{time:8.2f} {label:>{self.cpu_width}} {cells}"
        self.out.write(f"{line}  {' '.join(flags) or '-'}{self.suffix}")


class CsvPrinter(_Printer):
    def __init__(
        self,
        out: IO[str],
        keys: list[str],
        mode: str,
        tma: bool = False,
        timestamps: bool = False,
        hosts: Hosts | None = None,
    ) -> None:
        super().__init__(out, keys, mode, tma, timestamps, hosts)
        self.columns: list[str] | None = None  # known at the first interval: its idle states name columns
        self.writer = csv.writer(out, lineterminator="\n")

    def begin(self, batch: list[Sample]) -> None:
        if self.columns is None:
            names = [n for s in batch for n in s.cstates]
            self.columns = csv_columns(columns(self.keys, timestamps=self.timestamps, hosts=bool(self.hosts)), names)
            self.writer.writerow(self.columns)

    def write(self, s: Sample, **at: Any) -> None:
        if self.columns is None:
            self.begin([s])
        assert self.columns is not None
        rec = record(s, self.mode, host=self.host(s.cpu), **at)  # placed by name in the header's columns
        rec["overflows"] = ";".join(f"{k}={v}" for k, v in rec["overflows"].items())
        rec["estimated"] = ";".join(f"{k}={v:.3g}" for k, v in rec["estimated"].items())
        rec["power_source"] = ";".join(f"{k}={v}" for k, v in rec["power_source"].items())
        if rec["throttle"] is not None:
            rec["throttle"] = ";".join(rec["throttle"])
        for name, share in rec.pop("cstates").items():
            rec[cstate_column(name)] = share
        self.writer.writerow(["" if rec.get(c) is None else rec[c] for c in self.columns])


class JsonPrinter(_Printer):
    def __init__(
        self,
        out: IO[str],
        keys: list[str],
        mode: str,
        tma: bool = False,
        timestamps: bool = False,
        hosts: Hosts | None = None,
    ) -> None:
        super().__init__(out, keys, mode, tma, timestamps, hosts)
        # A record has exactly the fields records.columns names, in its order: looked up once per (with a
        # timestamp, with a host), not for every record.
        self._fields = {
            (ts, named): columns(keys, timestamps=ts, hosts=named) for ts in (False, True) for named in (False, True)
        }
        self._encode = json.JSONEncoder(separators=(",", ":")).encode

    def write(self, s: Sample, **at: Any) -> None:
        host = self.host(s.cpu)
        rec = record(s, self.mode, host=host, **at)
        fields = self._fields[at.get("timestamp") is not None, host is not None]
        self.out.write(self._encode({c: rec.get(c) for c in fields}) + "\n")


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
    power_fields: Collection[str] = (),
    tasks: TaskCounterSource | None = None,
    records: str = "all",
    on_tasks: Callable[[int, float, TaskSnapshot], None] | None = None,
    hosts: Hosts | None = None,
    packages: PackageSampler | None = None,
) -> dict[int, str]:
    """Print `count` intervals (forever when None, or until `stop` is set). The engine must be started;
    the caller stops it. A CPU whose sampler fails is reported once and dropped; the others go on.
    Returns the CPUs that failed (cpu -> why); raises only when every CPU has failed.

    `pace`: for an unthreaded engine, takes the next interval's samples (Engine.tick_on_schedule); False
    ends the run (stopping). `power_fields`: the power columns a table shows (pmutop.derive.power.SERIES that
    the run measures); the table's header is printed at once, before the first interval (which may be long).
    `tasks`: per-process and per-cgroup counters (--pid, --tasks, --cgroups, --cgroup), read after each
    interval's CPU samples; `records`: which kinds to print, "cpu", "task", "cgroup" or "all" (JSON only: CSV
    and the table print one kind). `on_tasks(interval, time, snapshot)`: each interval's snapshot, as read (the
    recorder's record_tasks; `interval` is the CPU samples' seq, `time` their run time). `hosts`: a fleet's
    (--prometheus) cpu ids -> (host, cpu): its records carry `host` and the host's own CPU number.

    `packages`: the DRAM bandwidth sampler (None: no source here): a package record per socket per interval,
    after the interval's other records ("package" or "all"). A sampler without its own thread (batch runs: see
    app.dram_setup) is read here, right after each interval's CPU samples (sample_once), so the records and a
    recording pair each reading with its interval exactly; one with a thread is paired by time
    (sinks.batch_packages)."""
    out = out or sys.stdout
    keys = feed.keys(feed.cpus[0])
    tma = any(feed.topdown_method(cpu) for cpu in feed.cpus)
    # The printers write into this buffer; each interval reaches `out` in one write (not one per line).
    buf = io.StringIO()
    printer = PRINTERS[fmt](buf, keys, mode, tma, timestamps, hosts) if records in ("cpu", "all") else None
    task_printer = None
    if tasks is not None and records != "cpu":
        from pmutop.sinks.batch_tasks import SnapshotPrinter

        task_printer = SnapshotPrinter(buf, fmt, tasks.events, mode, records, timestamps, warn)
    package_printer, pairing = None, None
    if packages is not None and records in ("package", "all"):
        from pmutop.sinks.batch_packages import PACKAGE_PRINTERS, PackagePairing

        package_printer = PACKAGE_PRINTERS[fmt](buf, packages.source_name, mode, timestamps)
        if packages.reading_thread:
            pairing = PackagePairing(packages, wait=min(max(feed.interval, 0.1), 1.0))
    if isinstance(printer, TablePrinter):
        printer.begin([], power_fields)
    _drain(buf, out)
    # Start-up is over: its heap leaves the collector's way now, with its one full collection (some ms), in the
    # wait for the first interval rather than in the middle of the run (a batch shows nothing it could delay).
    freeze_startup_heap()
    # Wall-clock time of the engine's start, for absolute timestamps.
    wall0 = time.time() - feed.elapsed()
    seen = {cpu: 0 for cpu in feed.cpus}
    if tasks is not None:
        tasks.begin()
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
        if printer is not None:
            print_interval(printer, batch, done + 1, wall0 if timestamps else None, warn, warned)
        if tasks is not None:
            at = wall0 if timestamps else None
            _print_tasks(task_printer, tasks, batch, done + 1, at, on_tasks)
        if packages is not None and batch:
            here = not packages.reading_thread  # read by this loop, right after the interval's CPU samples
            for read in _package_readings(packages, pairing, here, batch, stopped, warn):
                if package_printer is not None:
                    print_packages(package_printer, read, batch, done + 1, wall0 if timestamps else None)
            if packages.failure is not None and here:
                packages = None  # said once (above): the CPU records go on
        _drain(buf, out)
        out.flush()
        done += 1
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
    at, stamp = _stamp(batch, wall0)
    if hasattr(printer, "begin"):
        printer.begin(batch)
    per_package: dict[int, int] | None = None  # summed only where a sample has energy to divide
    for s in batch:
        pkg = None
        if s.energy_j and s.package is not None:
            if per_package is None:
                per_package = package_instructions(batch)
            pkg = per_package.get(s.package)
        printer.write(s, time=at, index=index, timestamp=stamp, pkg_instructions=pkg)
    if len(batch) > 1 and hasattr(printer, "write_total"):
        printer.write_total(batch, time=at, timestamp=stamp)


def _print_tasks(
    printer: Any,
    tasks: TaskCounterSource,
    batch: list[Sample],
    index: int,
    wall0: float | None,
    on_tasks: Callable[[int, float, TaskSnapshot], None] | None,
) -> None:
    """The processes' and cgroups' readings of this interval, stamped with the CPU records' time (they are read
    just after the CPUs); read even when not printed, so an exited process is dropped (the printer says the
    snapshot's notes)."""
    snapshot = tasks.read(batch)
    if not batch:
        return
    if on_tasks is not None:
        on_tasks(max(s.seq for s in batch), _time(batch), snapshot)
    if printer is not None:
        print_snapshot(printer, snapshot, batch, index, wall0)


def print_snapshot(printer: Any, snapshot: TaskSnapshot, batch: list[Sample], index: int, wall0: float | None) -> None:
    """One interval's task and cgroup records (live batch and replay --batch alike), stamped as its CPU records."""
    at, stamp = _stamp(batch, wall0)
    printer.write(snapshot, time=at, index=index, timestamp=stamp)


def _package_readings(
    packages: PackageSampler,
    pairing: Any,
    unthreaded: bool,
    batch: list[Sample],
    stopped: Callable[[], bool],
    warn: Callable[[str], None] | None,
) -> list[list[PackageDram]]:
    """The DRAM readings to print with this interval: read now beside an unthreaded engine (nothing else reads
    the source then), else the sampler thread's for this interval (none when they are not printed)."""
    if not unthreaded:
        return [read for _, read in pairing.take(_time(batch), stopped)] if pairing is not None else []
    try:
        return [packages.sample_once(batch)]
    except Exception as e:  # as the sampler's own thread: a source that broke is said once, the CPUs go on
        packages.failure = f"DRAM bandwidth stopped: {str(e).removeprefix('DRAM bandwidth: ')}"
        if warn is not None:
            warn(packages.failure)
        return []


def print_packages(
    printer: Any, packages: list[PackageDram], batch: list[Sample], index: int, wall0: float | None
) -> None:
    """One DRAM reading's package records (live batch and replay --batch alike), stamped as its interval's CPU
    records."""
    at, stamp = _stamp(batch, wall0)
    printer.write(packages, time=at, index=index, timestamp=stamp)


def _time(batch: list[Sample]) -> float:
    """An interval's time: when its last CPU was read."""
    at = batch[0].time
    for s in batch:  # max() over a loop: no generator to run every interval
        if s.time > at:
            at = s.time
    return at


def _stamp(batch: list[Sample], wall0: float | None) -> tuple[float, str | None]:
    """An interval's time and, given the start's wall-clock time `wall0`, its timestamp: every record of the
    interval (cpu, task, cgroup, package) carries both."""
    at = _time(batch)
    return at, _timestamp(wall0 + at) if wall0 is not None else None


def _drain(buf: io.StringIO, out: IO[str]) -> None:
    """Move what the printer wrote into `buf` to `out`, in one write."""
    text = buf.getvalue()
    if text:
        out.write(text)
        buf.seek(0)
        buf.truncate()
