"""What the DRAM bandwidth source gives its readers for one interval: plain values, no kernel objects.

Shared by the uncore reader (probes/dram.py), the live view, the batch printers, the recorder and the exporter
(a neutral leaf like task_reading). Bytes are memory-controller cache-line transfers × 64; rates are over the
measured interval, never the nominal one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

BYTES_PER_LINE = 64  # one CAS / one data_read count moves one 64-byte cache line

# Where the numbers come from (the `source` of `pmutop info`'s memory_bandwidth and of every package record).
SOURCE_UNCORE = "uncore"  # the kernel's memory-controller PMUs (uncore_imc_*, amd_umc_*)
SOURCE_NONE = "none"  # nothing measures DRAM traffic here (the `why` says what is missing)
SOURCE_SIMULATED = "simulated"  # the simulated machine's memory (pmutop.sim.dram): synthetic, labelled SIMULATED


@dataclass(frozen=True)
class DramReading:
    """One memory channel (one uncore PMU instance) over one interval.

    `read_bytes`/`write_bytes` are None when the counter did not run in the interval (not counted, which is
    not zero). `saturated`: a saturating counter (AMD UMC) hit its ceiling: the bytes are a lower bound and
    must be shown as such, never as a plain value."""

    pmu: str  # "uncore_imc_0", "amd_umc_3", "uncore_imc_free_running_1"
    package: int
    channel: int  # the instance's index within its package, 0..n-1
    read_bytes: float | None
    write_bytes: float | None
    interval: float  # seconds, measured between this reading and the previous one
    saturated: bool = False

    @property
    def read_bytes_per_s(self) -> float | None:
        return _rate(self.read_bytes, self.interval)

    @property
    def write_bytes_per_s(self) -> float | None:
        return _rate(self.write_bytes, self.interval)


@dataclass(frozen=True)
class PackageDram:
    """One package (socket) over one interval: the sum of its channels, and its theoretical peak."""

    package: int
    read_bytes: float | None
    write_bytes: float | None
    read_bytes_per_s: float | None
    write_bytes_per_s: float | None
    interval: float
    peak_bytes_per_s: float | None  # channels × MT/s × 8 bytes; None when the memory speed is unknown
    channels: tuple[DramReading, ...]
    saturated: bool = False  # any channel saturated: the totals are lower bounds

    @property
    def peak_share(self) -> float | None:
        """(read + write) / peak, or None when either side is unknown."""
        if self.peak_bytes_per_s is None or self.read_bytes_per_s is None or self.write_bytes_per_s is None:
            return None
        return (self.read_bytes_per_s + self.write_bytes_per_s) / self.peak_bytes_per_s


def package_totals(
    package: int, channels: tuple[DramReading, ...], interval: float, peak_bytes_per_s: float | None
) -> PackageDram:
    """Sum a package's channels; a direction is None when any of its channels was not counted (a partial sum
    would read as a drop in traffic)."""

    def total(values: list[float | None]) -> float | None:
        return None if not values or any(v is None for v in values) else sum(v for v in values if v is not None)

    read = total([c.read_bytes for c in channels])
    write = total([c.write_bytes for c in channels])
    return PackageDram(
        package,
        read,
        write,
        _rate(read, interval),
        _rate(write, interval),
        interval,
        peak_bytes_per_s,
        channels,
        any(c.saturated for c in channels),
    )


class DramSource(Protocol):
    """What reads DRAM traffic once per interval: the uncore reader (probes/dram.py DramCounters) or the
    simulated machine's (sim/dram.py SimDramCounters), already opened. `source` is SOURCE_UNCORE or
    SOURCE_SIMULATED; `why` says what is counted (channels, table) in one line."""

    @property
    def source(self) -> str: ...

    @property
    def why(self) -> str: ...

    def read(self) -> list[PackageDram]:
        """Every package since the previous read (or the open), one PackageDram each, by package number."""
        ...

    def close(self) -> None: ...


class PackageFeed(Protocol):
    """What the live view, the recorder and the exporter read: the latest packages and a short history, filled
    once per interval by the engine's package sampler (engine/package_sampler.py) or by a replay. `source_name`
    and `why` describe where the numbers come from (SOURCE_UNCORE, SOURCE_SIMULATED; a replay keeps the
    recording's)."""

    @property
    def seq(self) -> int:
        """Grows by one per interval read: the view redraws only when it changed."""

    @property
    def source_name(self) -> str: ...

    @property
    def why(self) -> str: ...

    def latest(self) -> list[PackageDram] | None: ...

    def wait_past(self, seq: int, timeout: float) -> bool:
        """Block until the seq is past `seq` or `timeout` seconds have gone; whether it is."""

    def latest_time(self) -> float: ...

    def history(self, package: int) -> list[PackageDram]:
        """Oldest first, as far back as kept (at least 120 intervals)."""

    def timeline(self) -> list[tuple[float, list[PackageDram]]]:
        """(run time, packages) per interval kept, oldest first (the heatmap's columns)."""


def _rate(value: float | None, interval: float) -> float | None:
    return None if value is None or interval <= 0 else value / interval


@dataclass(frozen=True)
class DramEstimate:
    """An estimate of DRAM traffic from core LLC misses × 64 bytes: shown with `est.`, never as measured.

    It misses write-backs, prefetches that hit DRAM without a demand miss and traffic from devices, and counts
    misses served by another socket's cache; it is only an order of magnitude when no uncore PMU exists."""

    bytes: float
    bytes_per_s: float | None
    interval: float
    estimate: bool = True
    label: str = "est."


def estimate_from_llc_misses(llc_misses: float, interval: float) -> DramEstimate:
    """LLC misses × 64 over the measured interval, labelled as an estimate."""
    total = llc_misses * BYTES_PER_LINE
    return DramEstimate(total, total / interval if interval > 0 else None, interval)
