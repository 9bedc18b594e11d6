"""`--batch` with a DRAM bandwidth source: the package records (one per socket per interval, pmutop.derive.
package_records) as JSON lines, CSV or a table, for the live batch and `replay --batch` alike; and how the live
batch pairs the package sampler's readings with its CPU intervals.

JSON prints them after each interval's CPU (and task and cgroup) records; CSV and the table print them as a
kind of their own (`--records package`)."""

from __future__ import annotations

import csv
import json
import threading
from collections import deque
from collections.abc import Callable
from typing import IO, Any

from pmutop.core.dram_reading import PackageDram
from pmutop.core.numfmt import fixed as _fmt
from pmutop.core.numfmt import si as _si
from pmutop.derive.package_records import csv_package_cells, csv_package_columns, package_record
from pmutop.engine.package_sampler import PackageSampler

Reading = tuple[float, list[PackageDram]]  # (the CPU samples' run time it was read after, the packages)


class PackageJsonPrinter:
    def __init__(self, out: IO[str], source: str, mode: str, timestamps: bool = False) -> None:
        self.out, self.source, self.mode = out, source, mode

    def write(self, packages: list[PackageDram], **at: Any) -> None:
        for p in packages:
            rec = package_record(p, self.source, self.mode, **at)
            print(json.dumps(rec, separators=(",", ":")), file=self.out)


class PackageCsvPrinter:
    """The JSON record's columns with the channels flattened (ch<N>_read_bytes_per_s, ...): the header is
    written with the first interval, which says how many channels a package has."""

    def __init__(self, out: IO[str], source: str, mode: str, timestamps: bool = False) -> None:
        self.source, self.mode, self.timestamps = source, mode, timestamps
        self.columns: list[str] | None = None
        self.writer = csv.writer(out, lineterminator="\n")

    def write(self, packages: list[PackageDram], **at: Any) -> None:
        if self.columns is None:
            channels = max((len(p.channels) for p in packages), default=0)
            self.columns = csv_package_columns(channels, timestamps=self.timestamps)
            self.writer.writerow(self.columns)
        for p in packages:
            rec = csv_package_cells(package_record(p, self.source, self.mode, **at))
            self.writer.writerow(["" if rec.get(c) is None else rec[c] for c in self.columns])


# (title, width): the values of a package's `all` row and of each of its channels' rows.
_TABLE = (("Read B/s", 9), ("Write B/s", 9), ("Total B/s", 9), ("Peak B/s", 9), ("Peak%", 6))


class PackageTablePrinter:
    """Per package: one row per memory channel, then the package's `all` row (its total, its peak and the
    share of it), as the CPU table ends each interval with its `all` row. A saturated counter's bytes are a
    lower bound: flagged `saturated`, never shown as a plain value without it."""

    def __init__(self, out: IO[str], source: str, mode: str, timestamps: bool = False) -> None:
        self.out, self.source = out, source
        self.simulated = mode == "SIMULATED" or source == "simulated"
        stamp = "timestamp".ljust(24) + " " if timestamps else ""
        header = stamp + f"{'time':>8} {'PKG':>3} {'CH':>3} {'PMU':<18} " + " ".join(f"{t:>{w}}" for t, w in _TABLE)
        print(header + "  flags" + ("  SIMULATED" if self.simulated else ""), file=self.out)

    def write(self, packages: list[PackageDram], *, time: float, index: int, timestamp: str | None = None) -> None:
        head = (f"{timestamp} " if timestamp else "") + f"{time:8.2f}"
        for p in packages:
            for c in p.channels:
                total = _sum(c.read_bytes_per_s, c.write_bytes_per_s)
                cells = (c.read_bytes_per_s, c.write_bytes_per_s, total)
                self._line(head, p.package, str(c.channel), c.pmu, cells, None, None, c.saturated)
            total = _sum(p.read_bytes_per_s, p.write_bytes_per_s)
            cells = (p.read_bytes_per_s, p.write_bytes_per_s, total)
            self._line(head, p.package, "all", "", cells, p.peak_bytes_per_s, p.peak_share, p.saturated)

    def _line(
        self,
        head: str,
        package: int,
        channel: str,
        pmu: str,
        rates: tuple[float | None, ...],
        peak: float | None,
        share: float | None,
        saturated: bool,
    ) -> None:
        widths = [w for _, w in _TABLE]
        cells = [_si(v, w) for v, w in zip(rates, widths, strict=False)]
        cells += [_si(peak, widths[3]), _fmt(share, ".1f", widths[4], 100)]
        line = f"{head} {package:>3} {channel:>3} {pmu[:18]:<18} " + " ".join(cells)
        line += "  " + ("saturated" if saturated else "-")
        print(line + ("  SIMULATED" if self.simulated else ""), file=self.out)


def _sum(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a + b


PACKAGE_PRINTERS: dict[str, Any] = {"table": PackageTablePrinter, "csv": PackageCsvPrinter, "json": PackageJsonPrinter}


class PackagePairing:
    """The threaded batch's package readings, handed over by time. The sampler's thread reads the DRAM source
    right after each interval's CPU samples, stamping the reading with their time (the newest sample's); the
    batch loop prints, after its interval's CPU records, every reading not printed yet whose time is at or before
    the interval's. Normally that is the one reading stamped with the interval's own time: it is waited for
    (at most `wait` seconds: it is read as soon as the samples are there). A reading that covers two intervals
    (the sampler was late) comes with the later one, its own measured `interval` saying so; nothing is printed
    twice or dropped."""

    def __init__(self, sampler: PackageSampler, wait: float) -> None:
        self.sampler = sampler
        self.wait = wait
        self._cond = threading.Condition()
        self._readings: deque[Reading] = deque()
        self._newest = float("-inf")
        sampler.add_listener(self._add)
        for at, packages in sampler.timeline():  # read before the listener was there (if any)
            self._add(0, at, packages)

    def _add(self, index: int, at: float, packages: list[PackageDram]) -> None:
        with self._cond:
            if at <= self._newest:
                return  # already had (the timeline and the listener both gave it)
            self._readings.append((at, packages))
            self._newest = at
            self._cond.notify_all()

    def take(self, at: float, stopped: Callable[[], bool]) -> list[Reading]:
        """The readings to print with the interval whose CPU records have time `at`."""

        def ready() -> bool:
            return self._newest >= at or self.sampler.failure is not None or stopped()

        with self._cond:
            self._cond.wait_for(ready, timeout=self.wait)
            out = []
            while self._readings and self._readings[0][0] <= at:
                out.append(self._readings.popleft())
            return out
