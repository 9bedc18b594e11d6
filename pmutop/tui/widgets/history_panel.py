"""History plots of what a run measures: the main screen's panels and the detail view's plots.

With hardware events: IPC, GHz, Util and LLC misses/s. Software-only runs plot what the kernel counts
(utilisation from its per-CPU times, context switches, migrations, faults), never empty hardware plots.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from textual import events
from textual.app import ComposeResult

from pmutop.derive.records import rate_title
from pmutop.tui import format as fmt
from pmutop.tui.model import CoreState, ViewModel, rate_series
from pmutop.tui.widgets.kept_lines import KeptLines
from pmutop.tui.widgets.plot import HistoryPlot


@dataclass(frozen=True)
class PlotSpec:
    series: str  # a key of CoreState.history
    title: str
    fmt: Callable[[float], str]
    floor: float  # the smallest scale top
    style: str


def _pct(v: float) -> str:
    return f"{v * 100:.0f}%"


def _two(v: float) -> str:
    return f"{v:.2f}"


def _si(v: float) -> str:
    return fmt.si(v, 0)


HARDWARE_PLOTS = {
    "ipc": PlotSpec("ipc", "IPC", _two, 4.0, "cyan"),
    "ghz": PlotSpec("ghz", "GHz", _two, 1.0, "green"),
    "util": PlotSpec("util", "Util %", _pct, 1.0, "yellow"),
    "llc": PlotSpec("llc_misses_per_s", "LLC miss/s", _si, 1e6, "magenta"),
}
PANEL_MIN_ROWS = 6  # border, 3 plot rows, the time axis
PANEL_MIN_WIDTH = 36
RATE_STYLES = ("bright_blue", "bright_magenta", "bright_green")


def plot_specs(keys: list[str], rate_keys: tuple[str, ...]) -> list[PlotSpec]:
    """Up to four plots of what `keys` measure, most telling first."""
    counted = set(keys)
    specs = []
    if {"instructions", "cycles"} <= counted:
        specs.append(HARDWARE_PLOTS["ipc"])
    if {"cycles", "ref_cycles"} <= counted:
        specs.append(HARDWARE_PLOTS["ghz"])
    specs.append(HARDWARE_PLOTS["util"])  # ref cycles / TSC, or the kernel's busy time
    if "llc_misses" in counted:
        specs.append(HARDWARE_PLOTS["llc"])
    for i, key in enumerate(rate_keys):
        if len(specs) >= 4:
            break
        title = rate_title(key)
        specs.append(PlotSpec(rate_series(key), title, _si, 10.0, RATE_STYLES[i % len(RATE_STYLES)]))
    return specs[:4]


class HistoryPanels(KeptLines):
    """The plots in a grid: two rows of two when tall enough, else one row (of as many as fit the width);
    follows one core or the all row. Its own lines (the background under the plots) are kept (KeptLines)."""

    def __init__(self, specs: list[PlotSpec], *, prefix: str = "hist", **kw: object) -> None:
        super().__init__(**kw)
        self.specs = specs
        self.prefix = prefix
        self._arranged: tuple[int, int] | None = None

    def compose(self) -> ComposeResult:
        for spec in self.specs:
            yield HistoryPlot(spec.title, spec.fmt, spec.floor, spec.style, id=self.plot_id(spec))

    def plot_id(self, spec: PlotSpec) -> str:
        return f"{self.prefix}-{spec.series.replace(':', '-')}"

    def on_resize(self, event: events.Resize) -> None:
        self.arrange_for(event.size.width, event.size.height)

    def arrange_for(self, width: int, height: int) -> None:
        n = len(self.specs)
        if not n:
            return
        if height >= 2 * PANEL_MIN_ROWS and n > 2:
            columns, shown = 2, n
        else:
            columns = max(1, min(n, width // PANEL_MIN_WIDTH))
            shown = columns
        if self._arranged == (columns, shown):
            return
        self._arranged = (columns, shown)
        self.styles.grid_size_columns = columns
        for i, plot in enumerate(self.query(HistoryPlot)):
            plot.display = i < shown

    def show(self, core: CoreState, model: ViewModel, interval: float, who: str | None = None) -> None:
        """Plot `core`'s history (scaled to itself: its shape is the point) against time, a column per
        `interval` seconds up to the newest interval, marking where the interval changed; `who` prefixes the
        titles."""
        marks = [at for at, _, _ in model.kept_marks()]
        for spec, plot in zip(self.specs, self.query(HistoryPlot), strict=True):  # composed in this order
            plot.set_title(f"{who} · {spec.title}" if who else spec.title)
            plot.set_values(core.history[spec.series], interval, spans=core.spans, end=model.latest_time, marks=marks)
