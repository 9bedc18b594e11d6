"""The memory view (6): DRAM bandwidth per package: its line as in the header, a bar per channel for read and
write, and the package's read and write history (the detail view's plot widget). Redrawn when the package
feed's seq moved, never on the CPU samples' own updates."""

from __future__ import annotations

from typing import ClassVar

from rich.console import Group as RichGroup
from rich.console import RenderableType
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Static

from pmutop.core.dram_reading import SOURCE_SIMULATED, PackageDram
from pmutop.tui.dram_text import channel_table, estimate_line, package_line, rate_text
from pmutop.tui.format import WAITING
from pmutop.tui.header import replay_mark
from pmutop.tui.model import ViewModel
from pmutop.tui.screens.base import VIEW_KEYS, ViewScreen
from pmutop.tui.widgets.kept_lines import KeptFooter
from pmutop.tui.widgets.plot import HistoryPlot

PLOT_FLOOR = 1e9  # bytes/s: an idle bus is not drawn as a full one


def package_block(p: PackageDram, width: int) -> RenderableType:
    """A package's header line and its channels' bars (the memory view, and the detail view of its row)."""
    return RichGroup(package_line(p, width), channel_table(p, width), Text(""))


class MemoryScreen(ViewScreen):
    # Its keys are the app's: 1-6/t and Esc select a view (priority bindings).
    BINDINGS: ClassVar[list[BindingType]] = [*VIEW_KEYS]

    def compose(self) -> ComposeResult:
        yield Static(id="mem-title")
        with VerticalScroll():
            yield Static(id="mem-channels")
            yield Vertical(id="mem-plots")
        yield KeptFooter()

    def on_mount(self) -> None:
        self._plots: dict[int, tuple[HistoryPlot, HistoryPlot]] = {}
        self._draw()

    def on_resize(self, event: events.Resize) -> None:
        self._draw()

    def refresh_from(self, model: ViewModel) -> None:
        """A CPU interval: only the estimate (no DRAM source) follows it; measured figures wait for the feed."""
        if self.live.package_feed is None and self.is_mounted:
            self.refresh_dram()

    def title_text(self) -> Text:
        feed = self.live.package_feed
        t = Text("Memory bandwidth per package and channel", style="bold")
        replay_mark(t, self.live.info)
        if self.live.info.simulated or (feed is not None and feed.source_name == SOURCE_SIMULATED):
            t.append("   SIMULATED", style="bold black on yellow")
        return t

    def refresh_dram(self) -> None:
        if self.is_mounted:
            self._draw()

    def _draw(self) -> None:
        self.query_one("#mem-title", Static).update(self.title_text())
        feed = self.live.package_feed
        width = self.size.width - 2
        body = self.query_one("#mem-channels", Static)
        if feed is None:
            why = self.live.dram_note or "no memory-controller counters in this run (see `pmutop info`)"
            lines = [Text(f"DRAM bandwidth: {why}", style="dim")]
            estimate = estimate_line(self.live.model.total.latest)
            if estimate is not None:
                lines.append(estimate)
            body.update(RichGroup(*lines))
            return
        timeline = feed.timeline()
        if not timeline:
            body.update(Text(WAITING, style="dim"))
            return
        at, packages = timeline[-1]
        source = Text(feed.why, style="dim")
        body.update(RichGroup(*(package_block(p, width) for p in packages), source))
        step = self.live.feed.interval
        for p in packages:
            read_plot, write_plot = self._plots_of(p.package)
            values = [(t, q) for t, kept in timeline for q in kept if q.package == p.package]
            spans = [(t - q.interval, t) for t, q in values]
            read_plot.set_values([q.read_bytes_per_s for _, q in values], step, spans=spans, end=at)
            write_plot.set_values([q.write_bytes_per_s for _, q in values], step, spans=spans, end=at)

    def _plots_of(self, package: int) -> tuple[HistoryPlot, HistoryPlot]:
        """The package's read and write plots, mounted the first time its figures come."""
        plots = self._plots.get(package)
        if plots is None:
            read = HistoryPlot(f"pkg{package} · DRAM read", rate_text, PLOT_FLOOR, "cyan")
            write = HistoryPlot(f"pkg{package} · DRAM write", rate_text, PLOT_FLOOR, "magenta")
            self.query_one("#mem-plots", Vertical).mount(Horizontal(read, write, classes="mem-pair"))
            plots = self._plots[package] = (read, write)
        return plots
