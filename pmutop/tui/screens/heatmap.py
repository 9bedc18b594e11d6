"""The heatmap screen: lays out the pure parts of pmutop.tui.heatmap for the screen's size and redraws
only what changed."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.widgets import Static

from pmutop.tui.format import MARK, WAITING
from pmutop.tui.heatmap import (
    CHROME_ROWS,
    DRAM_KEYS,
    Group,
    Metric,
    dram_rows,
    fold,
    geometry,
    group_values,
    legend,
    levels,
    metric_of,
    scale_for,
    tail,
    time_axis,
)
from pmutop.tui.model import CoreState, ViewModel, one_point_per_column, resample
from pmutop.tui.screens.base import VIEW_KEYS, ViewScreen
from pmutop.tui.widgets.heatmap_rows import HeatmapRows
from pmutop.tui.widgets.kept_lines import KeptFooter


class HeatmapScreen(ViewScreen):
    # Its keys are the app's: 1/2/3/t and Esc select a view, m chooses the metric (priority bindings).
    BINDINGS: ClassVar[list[BindingType]] = [*VIEW_KEYS]

    def __init__(self, metric: Metric | str = "ipc") -> None:
        super().__init__()
        self.metric = metric_of(metric) if isinstance(metric, str) else metric
        self.groups: list[Group] = []
        self.points = 0
        self.cell = 1
        self.label_width = 4
        self._layout_for: tuple[object, ...] | None = None  # (width, height, rows) the layout was made for
        self._shown: dict[str, str] = {}  # widget id -> text shown (title, legend, axis: set only on change)

    def compose(self) -> ComposeResult:
        yield Static(id="hm-title")
        yield Static(id="hm-legend")
        yield HeatmapRows(id="hm-rows")
        yield Static(id="hm-axis")
        yield KeptFooter()

    def on_mount(self) -> None:
        self.refresh_from(self.live.model)

    def on_resize(self, event: events.Resize) -> None:
        self.refresh_from(self.live.model)

    def set_metric(self, metric: Metric | str) -> None:
        """Show `metric`, or the metric of that key (an event's rate, "ev:<event>", included)."""
        self.metric = metric_of(metric) if isinstance(metric, str) else metric
        if self.is_mounted:
            self.refresh_from(self.live.model)

    @property
    def grouped(self) -> bool:
        return any(len(g.cpus) > 1 for g in self.groups)

    @staticmethod
    def package_rows(model: ViewModel) -> list[Group]:
        """One row per package, from the CPU that reads its values (the others have none to show)."""
        carriers = [c for c in model.cores.values() if c.latest is not None and "package" in c.latest.energy_j]
        return [Group(f"pkg {c.latest.package if c.latest.package is not None else c.cpu}", (c.cpu,)) for c in carriers]  # type: ignore[union-attr]

    def _layout(self, model: ViewModel) -> None:
        """Groups for the height, columns for the width: only when either (or the rows) change."""
        width, height = self.size
        packages = self.package_rows(model) if self.metric.per_package else None
        if self.metric.key in DRAM_KEYS:  # the DRAM feed's packages: labels only (the values are not a core's)
            packages = [Group(f"pkg{n}", ()) for n in model.packages if model.packages[n].dram is not None]
        key = (width, height, len(model.cores), tuple(packages) if packages is not None else None)
        if key == self._layout_for:
            return
        self._layout_for = key
        core_rows = max(height - CHROME_ROWS - 1, 1)  # one row is the all row
        self.groups = packages[:core_rows] if packages is not None else fold(list(model.cores.values()), core_rows)
        self.label_width = max((3, *(len(g.label) for g in self.groups)))  # no rows before the first reading
        self.points, self.cell = geometry(width, self.label_width)

    def _set(self, widget_id: str, text: Text) -> None:
        key = text.plain + repr(text.spans)
        if self._shown.get(widget_id) != key:
            self._shown[widget_id] = key
            self.query_one(f"#{widget_id}", Static).update(text)

    def waiting(self, model: ViewModel) -> bool:
        """Nothing to show yet: no interval, or for DRAM no figures from the package feed."""
        if self.metric.key in DRAM_KEYS:
            feed = self.live.package_feed
            return feed is not None and feed.latest() is None
        return model.waiting

    def title_text(self, model: ViewModel) -> Text:
        t = Text(f"Heatmap: {self.metric.title} per {'package' if self.metric.per_package else 'core'}", style="bold")
        if self.waiting(model):
            t.append(f"   {WAITING}", style="dim")
        elif self.metric.per_package and not self.groups:
            t.append("   not measured here", style="dim")
        elif self.grouped:  # short enough that the SIMULATED badge still fits at 80 columns
            size = max(len(g.cpus) for g in self.groups)
            t = Text(f"Heatmap: {self.metric.title}, rows are groups of ≤{size} CPUs (mean)", style="bold")
        if self.live.info.simulated:
            t.append("   SIMULATED", style="bold black on yellow")
        if self.metric.key.startswith("tma_") and not model.measures_topdown and not model.waiting:
            t.append("   no core measures top-down here (see `pmutop info`)", style="dim")
        note = model.interval_note()
        if note:
            t.append(f"   {note}", style="yellow")
        return t

    def refresh_dram(self) -> None:
        if self.metric.key in DRAM_KEYS:
            self.refresh_from(self.live.model)

    def refresh_from(self, model: ViewModel) -> int:
        """Redraw from `model`; returns how many heatmap lines changed (the app calls it every interval)."""
        if not self.is_mounted:
            return 0
        self._layout(model)
        metric, points, cell = self.metric, self.points, self.cell
        # Against time: a column is one interval of today's length, whatever the older points lasted.
        step, end = self.live.feed.interval, model.latest_time
        feed = self.live.package_feed
        dram: list[tuple[str, list[float | None]]] | None = None
        if metric.key in DRAM_KEYS:
            dram, top = dram_rows(feed.timeline() if feed else [], metric.key, end, step, points)
            dram = dram[: len(self.groups)] + dram[-1:] if len(dram) > len(self.groups) + 1 else dram
            scale = scale_for(metric, top)
        else:
            scale = scale_for(metric, model.series_top(metric.key))
        uniform = one_point_per_column(model.total.spans, end, step)

        def columns(core: CoreState) -> list[float | None]:
            history = core.history[metric.key]
            return tail(history, points) if uniform else resample(history, core.spans, end, step, points)

        left = end - points * step
        marks = [min(round((at - left) / step), points - 1) for at, _, _ in model.kept_marks() if at > left]
        self._set("hm-title", self.title_text(model))
        self._set("hm-legend", legend(metric, scale))
        axis = Text(" " * (self.label_width + 1))
        axis.append(time_axis(points, step, cell, marks))
        # Each label its own styled run: a picture (SVG) then places each at its column, not after a run of spaces
        # that a viewer without the monospace font draws narrower.
        axis.highlight_regex(r"\S+", style="dim")
        axis.highlight_words([MARK], style="yellow")
        self._set("hm-axis", axis)
        if dram is not None:
            with self.app.batch_update():
                shown = [(label, levels(values, scale)) for label, values in dram]
                return self.query_one("#hm-rows", HeatmapRows).set_rows(shown, self.label_width, cell)
        rows = []
        for g in self.groups:  # only the visible rows, only the visible columns
            values = group_values([columns(model.cores[cpu]) for cpu in g.cpus], points)
            rows.append((g.label, levels(values, scale)))
        rows.append(("all", levels(columns(model.total), scale)))
        with self.app.batch_update():
            return self.query_one("#hm-rows", HeatmapRows).set_rows(rows, self.label_width, cell)
