"""`pmutop diff A B` for recordings with DRAM bandwidth: each package's read and write bandwidth, averaged
over each whole recording (Σ bytes / Σ measured seconds of the readings that counted them), A beside B.

An average, not a median: bandwidth is a volume over time, and a recording's busy intervals carry as much of
it as they moved. A package whose counter saturated in some interval has a lower bound for an average (said)."""

from __future__ import annotations

from dataclasses import dataclass, field

from pmutop.core.dram_reading import PackageDram
from pmutop.core.numfmt import si

DIRECTIONS = (("read", "read B/s"), ("write", "write B/s"))


@dataclass
class PackageTotals:
    """A recording's DRAM readings summed per package and direction: bytes, and the seconds they cover."""

    bytes: dict[tuple[int, str], float] = field(default_factory=dict)
    seconds: dict[tuple[int, str], float] = field(default_factory=dict)
    saturated: set[int] = field(default_factory=set)
    readings: int = 0
    source: str | None = None

    def add(self, packages: list[PackageDram]) -> None:
        self.readings += 1
        for p in packages:
            for direction, value in (("read", p.read_bytes), ("write", p.write_bytes)):
                if value is None or p.interval <= 0:
                    continue  # not counted in this interval: not a zero
                key = (p.package, direction)
                self.bytes[key] = self.bytes.get(key, 0.0) + value
                self.seconds[key] = self.seconds.get(key, 0.0) + p.interval
            if p.saturated:
                self.saturated.add(p.package)

    def rate(self, package: int, direction: str) -> float | None:
        seconds = self.seconds.get((package, direction))
        return None if not seconds else self.bytes[(package, direction)] / seconds

    @property
    def packages(self) -> set[int]:
        return {package for package, _ in self.bytes}


def _change(a: float | None, b: float | None) -> str:
    if a is None or b is None or a == 0:
        return "-"
    return f"{(b - a) / abs(a) * 100:+.1f}%"


def package_diff_lines(a: PackageTotals, b: PackageTotals) -> list[str]:
    """The DRAM bandwidth section of `pmutop diff` (none when neither recording holds DRAM readings)."""
    if not (a.readings or b.readings):
        return []
    lines = ["", "DRAM bandwidth per package (average over each whole recording)"]
    lines.append(f"{'package':>7}  {'metric':<10} {'A':>10} {'B':>10} {'change':>8}")
    for package in sorted(a.packages | b.packages):
        for direction, title in DIRECTIONS:
            ra, rb = a.rate(package, direction), b.rate(package, direction)
            lines.append(f"{package:>7}  {title:<10} {si(ra, 10)} {si(rb, 10)} {_change(ra, rb):>8}")
    for side, totals in (("A", a), ("B", b)):
        if not totals.readings:
            lines.append(f"{side} holds no DRAM readings (recorded without a DRAM bandwidth source)")
        elif totals.saturated:
            listed = ", ".join(str(p) for p in sorted(totals.saturated))
            lines.append(f"{side}: a counter saturated on package {listed}: its average is a lower bound")
    return lines
