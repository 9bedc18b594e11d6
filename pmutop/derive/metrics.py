"""Derived per-core metrics from one interval's counts. None wherever an input is missing or zero."""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from pmutop.core.sample import Sample

# The exact formula of each metric, shown in the detail view and the docs.
FORMULAS: dict[str, str] = {
    "util": "ref_cycles / tsc (without ref cycles: busy / total from the kernel's per-CPU times)",
    "ghz": "cycles / ref_cycles × TSC Hz / 1e9",
    "ipc": "instructions / cycles",
    "llc_misses_per_s": "llc_misses / interval",
    "llc_mpki": "1000 × llc_misses / instructions",
    "llc_miss_ratio": "llc_misses / llc_references",
    "branch_miss_ratio": "branch_misses / branches",
}


@dataclass(frozen=True, slots=True)
class CoreMetrics:
    util: float | None = None
    ghz: float | None = None
    ipc: float | None = None
    llc_misses_per_s: float | None = None
    llc_mpki: float | None = None
    llc_miss_ratio: float | None = None
    branch_miss_ratio: float | None = None

    def as_dict(self) -> dict[str, float | None]:
        # Written out: dataclasses.asdict deep-copies field by field, and every record and diff calls this.
        return {
            "util": self.util,
            "ghz": self.ghz,
            "ipc": self.ipc,
            "llc_misses_per_s": self.llc_misses_per_s,
            "llc_mpki": self.llc_mpki,
            "llc_miss_ratio": self.llc_miss_ratio,
            "branch_miss_ratio": self.branch_miss_ratio,
        }


def _ratio(num: float | None, den: float | None) -> float | None:
    if num is None or not den:
        return None
    return num / den


def compute(
    counts: dict[str, int], tsc: int | None, tsc_hz: float | None, interval: float, util: float | None = None
) -> CoreMetrics:
    """`util` is the kernel's busy fraction, used only where there are no reference cycles."""
    misses = counts.get("llc_misses")
    return metrics_from(counts, tsc, tsc_hz, _ratio(misses, interval), util)


def metrics_from(
    counts: dict[str, int], tsc: int | None, tsc_hz: float | None, misses_per_s: float | None, util: float | None
) -> CoreMetrics:
    """The metrics of `counts` with the per-second rate and TSC rate already worked out (one CPU's, or several
    CPUs' sums)."""
    # Each ratio written out as _ratio's test (None or a zero divisor gives None): this runs for every row
    # of every interval, and a call each costs more than the division.
    ref = counts.get("ref_cycles")
    cycles = counts.get("cycles")
    instructions = counts.get("instructions")
    misses = counts.get("llc_misses")
    if ref is not None and tsc:
        util = min(ref / tsc, 1.0)  # utilisation(), written out here too: this runs for every row
    speed = cycles / ref if cycles is not None and ref else None
    references = counts.get("llc_references")
    branch_misses = counts.get("branch_misses")
    branches = counts.get("branches")
    return CoreMetrics(
        util=util,
        ghz=speed * tsc_hz / 1e9 if speed is not None and tsc_hz else None,
        ipc=instructions / cycles if instructions is not None and cycles else None,
        llc_misses_per_s=misses_per_s,
        llc_mpki=1000 * misses / instructions if misses is not None and instructions else None,
        llc_miss_ratio=misses / references if misses is not None and references else None,
        branch_miss_ratio=branch_misses / branches if branch_misses is not None and branches else None,
    )


def utilisation(counts: dict[str, int], tsc: int | None, util: float | None) -> float | None:
    """compute()'s util alone: reference cycles / TSC where both were counted, else `util`, the kernel's busy
    fraction (what a table showing no other metric needs)."""
    ref = counts.get("ref_cycles")
    if ref is not None and tsc:
        return min(ref / tsc, 1.0)  # ref cycles and TSC are read a few ns apart
    return util


def for_sample(s: Sample) -> CoreMetrics:
    return compute(s.counts, s.tsc, s.tsc_hz, s.interval, s.util)


def sum_counts(counts: list[dict[str, int]]) -> dict[str, int]:
    """Each key's sum over the dicts, keys in the order first seen. Cores of one run have the same keys in the
    same order, so their values are summed column by column (in C); anything else key by key."""
    keys = list(counts[0])
    if all(list(c) == keys for c in counts):
        # reduce(add): the naive running sum the loop below makes (sum() compensates floats on Python 3.12+).
        columns = zip(*(c.values() for c in counts), strict=True)
        return dict(zip(keys, (functools.reduce(operator.add, column) for column in columns), strict=True))
    out: dict[str, int] = {}
    for c in counts:
        for k, v in c.items():
            out[k] = out.get(k, 0) + v
    return out


def combined(
    samples: Iterable[Sample], sums: Callable[[list[dict[str, int]]], dict[str, int]] = sum_counts
) -> CoreMetrics:
    """Metrics of several cores taken together (sums of counts): the table's total/average row. Per-second
    rates are the sum of each core's rate over the time its own sample covers (a late sampler's covers more).
    `sums`: sum_counts, or a caller's copy that remembers sums it has made (the live view's all row)."""
    tsc = 0
    misses_per_s: float | None = None
    weighted_hz = 0.0
    utils: list[float] = []
    n = 0
    kept: list[dict[str, int]] = []
    for s in samples:
        if s.error or s.suspect:
            continue
        n += 1
        if s.util is not None:
            utils.append(s.util)
        kept.append(s.counts)
        if s.tsc:
            tsc += s.tsc
            weighted_hz += (s.tsc_hz or 0.0) * s.tsc
        if "llc_misses" in s.counts and s.interval > 0:
            misses_per_s = (misses_per_s or 0.0) + s.counts["llc_misses"] / s.interval
    if not n:
        return CoreMetrics()
    counts = sums(kept)
    util = sum(utils) / len(utils) if utils else None
    return metrics_from(counts, tsc or None, weighted_hz / tsc if tsc else None, misses_per_s, util)
