"""The detail view of one core (or of all CPUs together): history plots, the last interval's raw deltas,
overflow counts, the formulas behind the columns, top-down history."""

from __future__ import annotations

from typing import ClassVar

from rich.console import RenderableType
from rich.table import Table as RichTable
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Footer, Static

from pmutop.derive import topdown
from pmutop.tui import format as fmt
from pmutop.tui.model import CoreState, ViewModel, resample
from pmutop.tui.screens.base import VIEW_KEYS, ViewScreen
from pmutop.tui.topdown_view import COLOURS
from pmutop.tui.widgets.history_panel import HistoryPanels

HISTORY_WIDTH = 40  # cells of the detail view's top-down history


class DetailScreen(ViewScreen):
    """One core in depth: history plots, the last interval's raw deltas, overflow counts, formulas."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,enter", "app.pop_screen", "Back"),
        *VIEW_KEYS,
    ]

    def __init__(self, cpu: int) -> None:
        super().__init__()
        self.cpu = cpu

    def compose(self) -> ComposeResult:
        yield Static(id="detail-title")
        with VerticalScroll():
            yield HistoryPanels(self.live.plot_specs, prefix="detail", id="plots")
            with Horizontal(id="facts"):
                yield Static(id="deltas")
                yield Static(id="formulas")
            yield Static(id="tma-detail")
        yield Footer()

    def on_mount(self) -> None:
        self.refresh_from(self.live.model)

    def refresh_from(self, model: ViewModel) -> None:
        app = self.live
        core = model.cores[self.cpu] if self.cpu >= 0 else model.total  # -1: all CPUs together
        kind = {"P": "P-core", "E": "E-core"}.get(core.core_type or "", "")
        name = f"cpu {self.cpu}" if self.cpu >= 0 else f"all {len(model.cores)} CPUs"
        title = Text(name + (f" ({kind})" if kind else ""), style="bold")
        if app.info.simulated:
            title.append("   SIMULATED", style="bold black on yellow")
        if core.error:
            title.append(f"   failed: {core.error}", style="bold red")
        elif core.latest is not None and core.latest.suspect:
            title.append(f"   suspect: {core.latest.suspect}", style="bold red")
        note = model.interval_note()
        if note:
            title.append(f"   {note}", style="yellow")
        self.query_one("#detail-title", Static).update(title)
        # Scaled to this core (its shape is the point here); the table's sparklines compare cores.
        self.query_one("#plots", HistoryPanels).show(core, model, app.feed.interval)
        self.query_one("#deltas", Static).update(self._deltas(core))
        self.query_one("#formulas", Static).update(self._formulas(app.shown_formulas()))
        self.query_one("#tma-detail", Static).update(self._topdown(core, model, app.feed.interval))

    @staticmethod
    def _topdown(core: CoreState, model: ViewModel, step: float) -> RenderableType:
        """Level 1 history (one line each, 0..100%, a cell per `step` seconds, as the plots) and the latest
        level 2, where measured."""
        if core is model.total:  # the all row's sum has no method of its own: its cores' methods
            methods = [c.latest.topdown for c in model.cores.values() if c.latest is not None]
            method = "/".join(sorted({m for m in methods if m})) or None
            measured = sum(1 for m in methods if m)
            if method and measured < len(model.cores):  # a hybrid part's E-cores, say: the sum is of fewer
                method += f", {measured} of {len(model.cores)} CPUs"
            missing = "not measured on any CPU (see `pmutop info`)"
        else:
            method = core.latest.topdown if core.latest is not None else None
            missing = "not measured on this core (see `pmutop info`)"
        grid = RichTable.grid(padding=(0, 1))
        grid.add_column(style="bold", no_wrap=True)
        grid.add_column(no_wrap=True)
        grid.add_column(justify="right")
        if method is None:
            grid.add_row("top-down", Text(missing, style="dim"), "")
            return grid
        grid.add_row(Text(f"top-down ({method})", style="bold"), "history, 0..100%", "last")
        tma = core.tma or {}

        def history(key: str) -> list[float | None]:
            return resample(core.history[key], core.spans, model.latest_time, step, HISTORY_WIDTH)

        for k in topdown.LEVEL1:
            value = tma.get(k)
            grid.add_row(
                Text(topdown.LABELS[k], style=COLOURS[k]),
                Text(fmt.sparkline(history(k), HISTORY_WIDTH, 1.0), style=COLOURS[k]),
                "-" if value is None else f"{100 * value:.1f}%",
            )
        for k in topdown.TMA_FIELDS[4:]:
            if tma.get(k) is not None:
                grid.add_row(Text("  " + topdown.LABELS[k]), "", f"{100 * tma[k]:.1f}%")  # type: ignore[operator]
        return grid

    @staticmethod
    def _deltas(core: CoreState) -> RenderableType:
        s = core.latest
        grid = RichTable.grid(padding=(0, 1))
        grid.add_column(style="cyan")
        grid.add_column(justify="right")
        grid.add_column(style="green")
        if s is None:
            grid.add_row("last interval", "waiting for the first sample", "")
            return grid
        # Multiplexed or rotated events: the share of the time they were really counted.
        counted = ["counted"] if s.estimated else []
        if counted:
            grid.add_column(style="yellow", justify="right")
        grid.add_row(Text("last interval", style="bold"), f"{s.interval:.3f} s", "overflows", *counted)
        counts = dict(s.counts)
        if s.tsc is not None:
            counts["tsc"] = s.tsc
        for k in [*counts, *(k for k in s.estimated if k not in counts)]:
            ovf = core.overflow_totals.get(k, 0)
            value = f"~{counts[k]:,}" if k in s.estimated and k in counts else f"{counts[k]:,}" if k in counts else "-"
            fraction = [f"{s.estimated[k]:.0%}" if k in s.estimated else ""] if counted else []
            grid.add_row(k, value, str(ovf) if ovf else "", *fraction)
        if s.tsc_hz:
            grid.add_row("TSC Hz", f"{s.tsc_hz / 1e9:.4f} G", "", *([""] if counted else []))
        return grid

    @staticmethod
    def _formulas(formulas: list[tuple[str, str]]) -> RenderableType:
        grid = RichTable.grid(padding=(0, 1))
        grid.add_column(style="cyan", no_wrap=True)
        grid.add_column()
        grid.add_row(Text("formulas", style="bold"), "")
        for title, f in formulas:
            grid.add_row(title, f)
        return grid
