"""The heatmap view: cores down, time across, one colour per history point of the chosen metric.

The pure parts (scales, the colour ramp, folding many cores into groups, group means, the time axis) are
plain functions the tests call directly; `HeatmapScreen` only lays them out and redraws the lines that
changed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.geometry import Region
from textual.screen import Screen
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Footer, Static

from pmutop.core.cpulist import format_cpu_list
from pmutop.tui import format as fmt
from pmutop.tui.model import CoreState, ViewModel

HISTORY = 60  # intervals across: wide cells read better than many thin ones

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
    Metric("pkg_watts", "Package W", "nice", "W", floor=10.0),
)
BY_KEY: dict[str, Metric] = {m.key: m for m in METRICS}


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


def ago_text(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.3g} h ago"
    if seconds >= 120:
        return f"{seconds / 60:.3g} min ago"
    return f"{seconds:.3g} s ago"


def time_axis(points: int, interval: float, cell: int = 1) -> str:
    """The line under the cells: '60 s ago' under the oldest column, 'now' under the newest."""
    width = points * cell
    left, right = ago_text(points * interval), "now"
    if width < len(left) + len(right) + 1:
        return right.rjust(width)[-width:] if width else ""
    return left + right.rjust(width - len(left))


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
    """(history points shown, cells per point) for a screen `width` wide."""
    room = max(width - label_width - 3, 1)  # the label's gap and the padding
    points = min(HISTORY, room)
    return points, max(1, min(MAX_CELL, room // HISTORY))


# -- widgets


class HeatmapRows(Widget):
    """The coloured rows, drawn line by line: a refresh repaints only the lines whose content changed."""

    DEFAULT_CSS = "HeatmapRows { height: 1fr; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.lines: list[Text] = []
        self._keys: list[tuple[str, int, int, Levels]] = []  # what each line shows, to see what changed
        self._strips: dict[int, Strip] = {}

    def set_rows(self, rows: list[tuple[str, Levels]], label_width: int, cell: int) -> int:
        """Show one line per (label, levels); only changed lines are rebuilt and repainted. Returns how many."""
        keys = [(label, label_width, cell, steps) for label, steps in rows]
        old = self._keys
        if len(keys) != len(old):
            self.lines = [Text()] * len(keys)
            changed = list(range(max(len(keys), len(old))))
        else:
            changed = [y for y, (a, b) in enumerate(zip(keys, old, strict=True)) if a != b]
        self._keys = keys
        width = self.size.width
        for y in changed:
            if y < len(keys):
                label, _, _, steps = keys[y]
                self.lines[y] = row_text(label, label_width, steps, cell)
            self._strips.pop(y, None)
            self.refresh(Region(0, y, width, 1))
        return len(changed)

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if y >= len(self.lines):
            return Strip.blank(width, self.rich_style)
        strip = self._strips.get(y)
        if strip is None or strip.cell_length != width:
            segments = list(self.lines[y].render(self.app.console))
            strip = Strip([s for s in segments if s.text != "\n"] or [Segment("")]).crop_extend(
                0, width, self.rich_style
            )
            self._strips[y] = strip
        return strip


class HeatmapScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,3", "app.pop_screen", "Table"),
        Binding("1", "app.table", "Table", show=False),
        Binding("2,t", "app.topdown", "Top-down", show=False),
        Binding("m", "cycle_metric", "Metric"),
        Binding("q", "app.quit", "Quit"),
        Binding("question_mark,h", "app.help", "Help"),
    ]
    DEFAULT_CSS = """
    HeatmapScreen #hm-title { height: 1; background: $boost; text-style: bold; padding: 0 1;
                              text-wrap: nowrap; text-overflow: ellipsis; }
    HeatmapScreen #hm-legend, HeatmapScreen #hm-axis { height: 1; padding: 0 1; text-wrap: nowrap;
                                                      text-overflow: ellipsis; }
    HeatmapScreen #hm-rows { height: 1fr; padding: 0 1; }
    """

    def __init__(self, metric: str = "ipc") -> None:
        super().__init__()
        self.metric = BY_KEY[metric]
        self.groups: list[Group] = []
        self.points = 0
        self.cell = 1
        self.label_width = 4
        self._layout_for: tuple[int, int, int] | None = None  # (width, height, cores) the layout was made for
        self._shown: dict[str, str] = {}  # widget id -> text shown (title, legend, axis: set only on change)

    def compose(self) -> ComposeResult:
        yield Static(id="hm-title")
        yield Static(id="hm-legend")
        yield HeatmapRows(id="hm-rows")
        yield Static(id="hm-axis")
        yield Footer()

    def on_mount(self) -> None:
        self.refresh_from(self.app.model)  # type: ignore[attr-defined]

    def on_resize(self, event) -> None:  # type: ignore[no-untyped-def]
        self.refresh_from(self.app.model)  # type: ignore[attr-defined]

    def set_metric(self, key: str) -> None:
        self.metric = BY_KEY[key]
        if self.is_mounted:
            self.refresh_from(self.app.model)  # type: ignore[attr-defined]

    def action_cycle_metric(self) -> None:
        i = METRICS.index(self.metric)
        self.set_metric(METRICS[(i + 1) % len(METRICS)].key)

    @property
    def grouped(self) -> bool:
        return any(len(g.cpus) > 1 for g in self.groups)

    def _layout(self, model: ViewModel) -> None:
        """Groups for the height, columns for the width: only when either (or the core count) changes."""
        width, height = self.size
        key = (width, height, len(model.cores))
        if key == self._layout_for:
            return
        self._layout_for = key
        core_rows = max(height - CHROME_ROWS - 1, 1)  # one row is the all row
        self.groups = fold(list(model.cores.values()), core_rows)
        self.label_width = max(3, *(len(g.label) for g in self.groups))
        self.points, self.cell = geometry(width, self.label_width)

    def _set(self, widget_id: str, text: Text) -> None:
        key = text.plain + repr(text.spans)
        if self._shown.get(widget_id) != key:
            self._shown[widget_id] = key
            self.query_one(f"#{widget_id}", Static).update(text)

    def title_text(self, model: ViewModel) -> Text:
        t = Text(f"Heatmap: {self.metric.title} per core", style="bold")
        if self.grouped:  # short enough that the SIMULATED badge still fits at 80 columns
            size = max(len(g.cpus) for g in self.groups)
            t = Text(f"Heatmap: {self.metric.title}, rows are groups of ≤{size} CPUs (mean)", style="bold")
        if self.app.info.simulated:  # type: ignore[attr-defined]
            t.append("   SIMULATED", style="bold black on yellow")
        if self.metric.key.startswith("tma_") and not model.measures_topdown:
            t.append("   no core measures top-down here (see `pmutop info`)", style="dim")
        note = model.interval_note()
        if note:
            t.append(f"   {note}", style="yellow")
        return t

    def refresh_from(self, model: ViewModel) -> int:
        """Redraw from `model`; returns how many heatmap lines changed (the app calls it every interval)."""
        if not self.is_mounted:
            return 0
        self._layout(model)
        metric, points, cell = self.metric, self.points, self.cell
        scale = scale_for(metric, model.series_top(metric.key))
        interval = self.app.feed.interval  # type: ignore[attr-defined]
        self._set("hm-title", self.title_text(model))
        self._set("hm-legend", legend(metric, scale))
        axis = Text(" " * (self.label_width + 1) + time_axis(points, interval, cell), style="dim")
        self._set("hm-axis", axis)
        rows = []
        for g in self.groups:  # only the visible rows, only the visible columns
            values = group_values([model.cores[cpu].history[metric.key] for cpu in g.cpus], points)
            rows.append((g.label, levels(values, scale)))
        rows.append(("all", levels(tail(model.total.history[metric.key], points), scale)))
        with self.app.batch_update():
            return self.query_one("#hm-rows", HeatmapRows).set_rows(rows, self.label_width, cell)
