"""`pmutop --batch`: one line per CPU per interval as a table, CSV or JSON lines."""

from __future__ import annotations

import csv
import json
import sys
from typing import IO, Any

from pmutop.engine.engine import Engine
from pmutop.engine.sample import Sample
from pmutop.errors import HardwareError
from pmutop.metrics import for_sample
from pmutop.sinks.records import METRIC_ORDER, count_columns, rate_columns, record


def _fmt(value: float | None, spec: str, scale: float = 1.0) -> str:
    return "-" if value is None else format(value * scale, spec)


def _si(value: float | None) -> str:
    if value is None:
        return "-"
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= div:
            return f"{value / div:.1f}{unit}"
    return f"{value:.0f}"


class TablePrinter:
    HEADER = (
        f"{'time':>8} {'cpu':>4} {'util%':>6} {'GHz':>5} {'IPC':>5} {'LLCmiss/s':>9} {'MPKI':>6} "
        f"{'LLCmiss%':>8} {'brmiss%':>7}  flags"
    )

    def __init__(self, out: IO[str], keys: list[str], mode: str) -> None:
        self.out = out
        self.mode = mode
        self.simulated = mode == "SIMULATED"
        header = self.HEADER + ("  SIMULATED" if self.simulated else "")
        print(header, file=out)

    def write(self, s: Sample) -> None:
        m = for_sample(s)
        flags = []
        if s.overflows:
            flags.append("ovf:" + ",".join(s.overflows))
        if s.estimated:
            flags.append(f"est:{min(s.estimated.values()):.0%}")
        if s.suspect:
            flags.append("SUSPECT")
        if s.suspect:
            cells = " ".join(f"{'?':>{w}}" for w in (6, 5, 5, 9, 6, 8, 7))
        else:
            cells = (
                f"{_fmt(m.util, '6.1f', 100)} {_fmt(m.ghz, '5.2f')} {_fmt(m.ipc, '5.2f')} "
                f"{_si(m.llc_misses_per_s):>9} {_fmt(m.llc_mpki, '6.2f')} {_fmt(m.llc_miss_ratio, '8.1f', 100)} "
                f"{_fmt(m.branch_miss_ratio, '7.2f', 100)}"
            )
        line = f"{s.time:8.2f} {s.cpu:>4} {cells}  {' '.join(flags) or '-'}"
        if self.simulated:
            line += "  SIMULATED"
        print(line, file=self.out)


class CsvPrinter:
    def __init__(self, out: IO[str], keys: list[str], mode: str) -> None:
        self.mode = mode
        self.columns = [
            "time",
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
        self.writer = csv.writer(out, lineterminator="\n")
        self.writer.writerow(self.columns)

    def write(self, s: Sample) -> None:
        rec = record(s, self.mode)
        rec["overflows"] = ";".join(f"{k}={v}" for k, v in rec["overflows"].items())
        rec["estimated"] = ";".join(f"{k}={v:.3g}" for k, v in rec["estimated"].items())
        self.writer.writerow(["" if rec.get(c) is None else rec[c] for c in self.columns])


class JsonPrinter:
    def __init__(self, out: IO[str], keys: list[str], mode: str) -> None:
        self.out = out
        self.mode = mode

    def write(self, s: Sample) -> None:
        print(json.dumps(record(s, self.mode), separators=(",", ":")), file=self.out)


PRINTERS: dict[str, Any] = {"table": TablePrinter, "csv": CsvPrinter, "json": JsonPrinter}


def run_batch(engine: Engine, fmt: str, count: int | None, mode: str, out: IO[str] | None = None, warn=None) -> None:
    """Print `count` intervals (forever when None). The engine must be started; the caller stops it."""
    out = out or sys.stdout
    keys = engine.backend.counters(engine.cpus[0]).keys
    printer = PRINTERS[fmt](out, keys, mode)
    seen = {cpu: 0 for cpu in engine.cpus}
    warned: set[tuple[int, str]] = set()
    done = 0
    while count is None or done < count:
        if not engine.wait_for_samples(seen, timeout=engine.interval * 3 + 10):
            raise HardwareError(f"no samples arrived for {engine.interval * 3 + 10:.0f} s")
        failures = engine.failures()
        if failures:
            raise HardwareError(next(iter(failures.values())))
        for cpu in engine.cpus:
            s = engine.rings[cpu].since(seen[cpu])[0]
            seen[cpu] = s.seq
            if s.suspect and warn and (cpu, s.suspect) not in warned:
                warned.add((cpu, s.suspect))
                warn(f"cpu {cpu}: suspect sample at {s.time:.2f} s: {s.suspect}")
            printer.write(s)
        out.flush()
        done += 1
