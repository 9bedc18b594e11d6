"""The heatmap view: cores down, time across, one colour per history point of the chosen metric.

The pure parts (scales, the colour ramp, folding many cores into groups, group means, the time axis) are
plain functions the tests call directly; pmutop.tui.screens.heatmap lays them out and
pmutop.tui.widgets.heatmap_rows redraws the lines that changed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from rich.style import Style
from rich.text import Text

from pmutop.core.cpulist import format_cpu_list
from pmutop.core.dram_reading import PackageDram
from pmutop.derive.records import rate_title
from pmutop.tui import format as fmt
from pmutop.tui.model import HISTORY, CoreState, rate_series, resample

WIDE_FROM = 60  # columns: cells widen (up to MAX_CELL characters) only while this many columns still fit

# Viridis in 9 steps: perceptually uniform, readable by colour-blind people, dark = low, bright = high.
RAMP: tuple[str, ...] = (
    "#440154", "#472d7b", "#3b528b", "#2c728e", "#21918c", "#28ae80", "#5ec962", "#addc30", "#fde725",
)  # fmt: skip
RAMP_STYLES: tuple[Style, ...] = tuple(Style(bgcolor=c) for c in RAMP)
MISSING_CHAR = "·"  # no sample (suspect, failed, before the start, not measured): unlike any value
MISSING_STYLE = Style(dim=True)
LOG_DECADES = 4  # a log scale spans this many decades below its (round) top
MAX_CELL = 3  # cells per history point on wide screens (wider would only smear)
CHROME_ROWS = 4  # title, legend, time axis, footer


@dataclass(frozen=True)
class Metric:
    key: str  # a CoreState.history key
    title: str
    rule: str  # "unit": fixed 0..1; "nice": 0..a round ceiling of the largest value seen; "log": decades
    unit: str = ""
    floor: float = 1.0  # the smallest "nice" ceiling (an idle machine must not look busy)
    percent: bool = False  # 0..1 shown as 0..100 %
    per_package: bool = False  # measured once per package (on its first CPU): one row per package


METRICS: tuple[Metric, ...] = (
    Metric("ipc", "IPC", "nice", floor=1.0),
    Metric("util", "Util %", "unit", "%", percent=True),
    Metric("ghz", "GHz", "nice", "GHz", floor=1.0),
    Metric("llc_misses_per_s", "LLC miss/s", "log", "/s"),
    Metric("tma_retiring", "Retiring", "unit", "%", percent=True),
    Metric("tma_bad_speculation", "Bad speculation", "unit", "%", percent=True),
    Metric("tma_frontend_bound", "Frontend bound", "unit", "%", percent=True),
    Metric("tma_backend_bound", "Backend bound", "unit", "%", percent=True),
    # Beside the counters (pmutop.derive.power): empty rows where no source measures them.
    Metric("busy", "Busy %", "nice", "%", floor=100.0),
    Metric("bzy_mhz", "Bzy MHz", "nice", "MHz", floor=1000.0),
    Metric("temp_c", "Temperature", "nice", "°C", floor=100.0),
    Metric("pkg_watts", "Package W", "nice", "W", floor=10.0, per_package=True),
)
# DRAM bandwidth from the package feed (not a core's history): one row per package, its channels added up (the
# memory view shows the channels), GB/s; offered only where a DRAM source measures it.
DRAM_METRICS: tuple[Metric, ...] = (
    Metric("dram_read", "DRAM read", "nice", "GB/s", floor=1.0, per_package=True),
    Metric("dram_write", "DRAM write", "nice", "GB/s", floor=1.0, per_package=True),
)
DRAM_KEYS = frozenset(m.key for m in DRAM_METRICS)
BY_KEY: dict[str, Metric] = {m.key: m for m in (*METRICS, *DRAM_METRICS)}


RATE_PREFIX = rate_series("")


def rate_metric(event: str) -> Metric:
    """The per-second rate of a counted event beyond the standard metrics' inputs (ctx switches, faults)."""
    return Metric(rate_series(event), rate_title(event), "log", "/s")


def metric_of(key: str) -> Metric:
    """The metric of a history key: one of METRICS, or an event's rate ("ev:<event>"); KeyError otherwise."""
    if key.startswith(RATE_PREFIX):
        return rate_metric(key[len(RATE_PREFIX) :])
    return BY_KEY[key]


def metrics_for(rate_keys: Iterable[str]) -> tuple[Metric, ...]:
    """Every metric the heatmap can draw in a run whose extra events are `rate_keys`."""
    return (*METRICS, *(rate_metric(k) for k in rate_keys))


@dataclass(frozen=True)
class Scale:
    lo: float
    hi: float
    log: bool = False

    def fraction(self, value: float | None) -> float | None:
        """Where `value` sits between lo and hi, clamped to 0..1; None stays None."""
        if value is None or math.isnan(value):
            return None
        if self.log:
            if value <= self.lo:
                return 0.0
            f = (math.log10(value) - math.log10(self.lo)) / (math.log10(self.hi) - math.log10(self.lo))
        else:
            f = (value - self.lo) / (self.hi - self.lo) if self.hi > self.lo else 0.0
        return min(max(f, 0.0), 1.0)

    def level(self, value: float | None) -> int | None:
        """The ramp step of `value` (0 … len(RAMP) - 1), or None for no sample."""
        f = self.fraction(value)
        return None if f is None else min(int(f * len(RAMP)), len(RAMP) - 1)


def scale_for(metric: Metric, top: float) -> Scale:
    """The colour scale of `metric` when the largest value kept (over all cores) is `top`."""
    if metric.rule == "unit":
        return Scale(0.0, 1.0)
    if metric.rule == "log":
        # A round decade at the top, a fixed span below: scales only move by whole decades, so colours stay put.
        hi = 10.0 ** math.ceil(math.log10(top)) if top > 0 else 10.0**LOG_DECADES
        hi = max(hi, 10.0**LOG_DECADES)
        return Scale(hi / 10.0**LOG_DECADES, hi, log=True)
    return Scale(0.0, fmt.nice_ceiling(top, metric.floor))


def value_text(metric: Metric, value: float) -> str:
    if metric.percent:
        return f"{value * 100:.0f}%"
    if metric.rule == "log":
        return fmt.si(value, 0) + metric.unit
    return f"{value:g}" + (f" {metric.unit}" if metric.unit else "")


def legend(metric: Metric, scale: Scale) -> Text:
    """'IPC  0 ███ 4   · no sample': the metric, the scale's ends with units and the ramp between them."""
    t = Text()
    t.append(metric.title, style="bold")
    t.append(f"  {value_text(metric, scale.lo)} ")
    for style in RAMP_STYLES:
        t.append("  ", style=style)
    t.append(f" {value_text(metric, scale.hi)}")
    if scale.log:
        t.append(" (log)", style="dim")
    t.append("   ")
    t.append(MISSING_CHAR, style=MISSING_STYLE)
    t.append(" no sample", style="dim")
    return t


def time_axis(points: int, interval: float, cell: int = 1, marks: Sequence[int] = ()) -> str:
    """The line under the cells: round times ago on the columns they fall on, 'now' under the newest, a mark
    under the columns where the interval changed (the same axis as the history plots')."""
    return fmt.time_axis(points, interval, cell, marks)


# -- rows: single cores, or groups of them when they do not fit


@dataclass(frozen=True)
class Group:
    label: str
    cpus: tuple[int, ...]


def _chunks(cpus: list[int], size: int) -> list[list[int]]:
    return [cpus[i : i + size] for i in range(0, len(cpus), size)]


def _sizes() -> Iterable[int]:
    """Candidate group sizes, small first: 1-4, then multiples of 4 (round labels like 0-15)."""
    yield from (1, 2, 3)
    n = 4
    while True:
        yield n
        n += 4


def group_label(cpus: Sequence[int], core_type: str | None, width: int = 12) -> str:
    suffix = f" {core_type}" if core_type else ""
    text = format_cpu_list(list(cpus))
    if len(text) + len(suffix) > width:  # scattered CPUs: the span, marked as not contiguous
        text = f"{cpus[0]}-{cpus[-1]}~"
    return text + suffix


def fold(cores: Sequence[CoreState], rows: int) -> list[Group]:
    """At most `rows` rows for `cores`: one per core when they fit, else groups of equal size, split by core
    type first (a mean over P- and E-cores would hide both), then into consecutive CPU ranges."""
    rows = max(rows, 1)
    if len(cores) <= rows:
        return [Group(c.label, (c.cpu,)) for c in cores]
    by_type: dict[str | None, list[int]] = {}
    for c in cores:
        by_type.setdefault(c.core_type, []).append(c.cpu)
    kinds = list(by_type.items()) if len(by_type) <= rows else [(None, [c.cpu for c in cores])]
    kinds = [(t, sorted(cpus)) for t, cpus in kinds]
    total = len(cores)
    for size in _sizes():
        if size >= total or sum(math.ceil(len(cpus) / size) for _, cpus in kinds) <= rows:
            break
    return [Group(group_label(chunk, t), tuple(chunk)) for t, cpus in kinds for chunk in _chunks(cpus, size)]


def dram_rows(
    timeline: Sequence[tuple[float, list[PackageDram]]], key: str, end: float, step: float, points: int
) -> tuple[list[tuple[str, list[float | None]]], float]:
    """Per package ("pkg0", ...) then "all" (the packages added up), `points` columns of `step` seconds up to
    `end` of DRAM read or write GB/s, from the package feed's timeline; and the largest value kept (the scale)."""
    write = key == "dram_write"
    series: dict[str, tuple[list[float | None], list[tuple[float, float]]]] = {}
    top = 0.0
    for at, packages in timeline:
        total: float | None = 0.0
        for p in packages:
            rate = p.write_bytes_per_s if write else p.read_bytes_per_s
            value = None if rate is None else rate / 1e9
            values, spans = series.setdefault(f"pkg{p.package}", ([], []))
            values.append(value)
            spans.append((at - p.interval, at))
            total = None if value is None or total is None else total + value
            top = max(top, value or 0.0)
        if packages:
            values, spans = series.setdefault("all", ([], []))
            values.append(total)
            spans.append((at - packages[0].interval, at))
            top = max(top, total or 0.0)
    rows = [(label, resample(values, spans, end, step, points)) for label, (values, spans) in series.items()]
    rows.sort(key=lambda row: row[0] == "all")  # the all row last, as for cores
    return rows, top


def tail(history: Sequence[float | None], points: int) -> list[float | None]:
    """The last `points` values, padded with None on the left (the oldest columns) when shorter."""
    n = len(history)
    return [history[i] if i >= 0 else None for i in range(n - points, n)]


def group_values(histories: Sequence[Sequence[float | None]], points: int) -> list[float | None]:
    """Per column, the mean over the group's cores that have a value there (None when none has).

    Histories are aligned at their newest point: every core appends once per interval, and one that failed
    stops appending, so its older points are still the right time."""
    if len(histories) == 1:
        return tail(histories[0], points)
    sums = [0.0] * points
    counts = [0] * points
    for h in histories:
        for i, v in enumerate(tail(h, points)):
            if v is not None:
                sums[i] += v
                counts[i] += 1
    return [s / n if n else None for s, n in zip(sums, counts, strict=True)]


Levels = tuple[int | None, ...]  # one ramp step per shown point; what a row looks like, cheap to compare


def levels(values: Sequence[float | None], scale: Scale) -> Levels:
    return tuple(scale.level(v) for v in values)


def cells_text(values: Sequence[float | None], scale: Scale, cell: int = 1) -> Text:
    """One background-coloured run of `cell` spaces per value; a dim dot where there is no sample."""
    return levels_text(levels(values, scale), cell)


def levels_text(steps: Levels, cell: int = 1) -> Text:
    t = Text()
    blank = " " * cell
    missing = MISSING_CHAR.center(cell)
    i, n = 0, len(steps)
    while i < n:  # one span per run of equal steps: fewer segments to draw
        j = i
        while j < n and steps[j] == steps[i]:
            j += 1
        level = steps[i]
        if level is None:
            t.append(missing * (j - i), style=MISSING_STYLE)
        else:
            t.append(blank * (j - i), style=RAMP_STYLES[level])
        i = j
    return t


def row_text(label: str, label_width: int, steps: Levels, cell: int = 1) -> Text:
    t = Text(label[:label_width].ljust(label_width) + " ", style="bold" if label == "all" else "")
    t.append_text(levels_text(steps, cell))
    return t


def geometry(width: int, label_width: int) -> tuple[int, int]:
    """(time columns shown, characters per column) for a screen `width` wide: the whole width, in wider cells
    while WIDE_FROM columns still fit (they read better than many thin ones), never more columns than the
    history keeps."""
    room = max(width - label_width - 3, 1)  # the label's gap and the padding
    cell = max(1, min(MAX_CELL, room // WIDE_FROM))
    return min(HISTORY, room // cell), cell
