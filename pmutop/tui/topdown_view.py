"""The top-down view: one stacked bar per core (Retiring, Bad speculation, Frontend, Backend), the
percentages and the dominant bottleneck; the `all` row weights cores by their slots."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from pmutop.derive import topdown
from pmutop.tui.model import CoreState, ViewModel

COLOURS: dict[str, str] = {
    "tma_retiring": "green",
    "tma_bad_speculation": "red",
    "tma_frontend_bound": "magenta",
    "tma_backend_bound": "blue",
}
SHORT = {"tma_retiring": "Ret%", "tma_bad_speculation": "Bad%", "tma_frontend_bound": "FE%", "tma_backend_bound": "BE%"}
FIXED_COLUMNS = {"cpu": 6, **{k: 5 for k in SHORT}, "dominant": 15}
NOT_MEASURED = "not measured on this core (see `pmutop info`)"


def stacked_bar(fractions: dict[str, float | None] | None, width: int) -> Text:
    """Four coloured segments whose lengths add up to `width` (largest remainders get the spare cells)."""
    if not fractions or any(fractions.get(k) is None for k in topdown.LEVEL1):
        return Text("".ljust(width))
    exact = [(fractions[k] or 0.0) * width for k in topdown.LEVEL1]
    cells = [int(x) for x in exact]
    for i in sorted(range(4), key=lambda i: exact[i] - cells[i], reverse=True)[: width - sum(cells)]:
        cells[i] += 1
    bar = Text()
    for k, n in zip(topdown.LEVEL1, cells, strict=True):
        bar.append("█" * n, style=COLOURS[k])
    return bar


def legend() -> Text:
    t = Text()
    for k in topdown.LEVEL1:
        t.append("██ ", style=COLOURS[k])
        t.append(f"{topdown.LABELS[k]}   ")
    return t


def row_cells(core: CoreState, bar_width: int) -> list[Text]:
    label = Text("all" if core.cpu < 0 else core.label, style="bold" if core.cpu < 0 else "")
    if core.error is not None:
        return [label, Text("failed", style="bold red"), *(Text("") for _ in SHORT), Text("")]
    tma = core.tma
    if tma is None or tma.get("tma_retiring") is None:
        why = "waiting for a sample" if core.latest is None else NOT_MEASURED
        if core.latest is not None and core.latest.topdown is not None:
            why = "idle (no slots this interval)"
        return [label, Text(why[:bar_width], style="dim"), *(Text("") for _ in SHORT), Text("")]
    pct = [Text(f"{100 * (tma[k] or 0.0):5.1f}", style=COLOURS[k]) for k in SHORT]
    return [label, stacked_bar(tma, bar_width), *pct, Text(topdown.dominant(tma) or "", style="bold")]


class TopdownScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,t,2", "app.pop_screen", "Table"),
        Binding("1", "app.table", "Table", show=False),
        Binding("3", "app.heatmap", "Heatmap", show=False),
        Binding("q", "app.quit", "Quit"),
        Binding("question_mark,h", "app.help", "Help"),
    ]
    DEFAULT_CSS = """
    TopdownScreen #tma-title { height: 1; background: $boost; text-style: bold; padding: 0 1; }
    TopdownScreen #tma-legend { height: 1; padding: 0 1; }
    TopdownScreen #tma { height: 1fr; }
    """

    def compose(self) -> ComposeResult:
        yield Static(id="tma-title")
        yield Static(legend(), id="tma-legend")
        yield DataTable(id="tma", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        self._bar_width = 0
        self._rows: list[str] = []
        self._shown: dict[tuple[str, str], tuple[str, str]] = {}  # cell -> (text, styles) on screen
        self._build(self.size.width)
        self.refresh_from(self.app.model)  # type: ignore[attr-defined]

    def on_resize(self, event) -> None:  # type: ignore[no-untyped-def]
        if self._build(event.size.width):
            self.refresh_from(self.app.model)  # type: ignore[attr-defined]

    def _build(self, width: int) -> bool:
        bar = max(8, width - sum(FIXED_COLUMNS.values()) - 2 * (len(FIXED_COLUMNS) + 1) - 2)
        if bar == self._bar_width:
            return False
        self._bar_width = bar
        table = self.query_one("#tma", DataTable)
        table.clear(columns=True)
        self._shown = {}
        table.add_column("CPU", width=FIXED_COLUMNS["cpu"], key="cpu")
        table.add_column("Issue slots", width=bar, key="bar")
        for k, title in SHORT.items():
            table.add_column(Text(title, justify="right"), width=FIXED_COLUMNS[k], key=k)
        table.add_column("Bottleneck", width=FIXED_COLUMNS["dominant"], key="dominant")
        self._rows = []
        return True

    def refresh_from(self, model: ViewModel) -> None:
        app = self.app
        title = Text("Top-down: where each core's issue slots go", style="bold")
        if app.info.simulated:  # type: ignore[attr-defined]
            title.append("   SIMULATED", style="bold black on yellow")
        if not model.measures_topdown:
            title.append("   no core measures top-down here (see `pmutop info`)", style="dim")
        self.query_one("#tma-title", Static).update(title)
        table = self.query_one("#tma", DataTable)
        rows = [(str(cpu), core) for cpu, core in model.cores.items()] + [("total", model.total)]
        keys = [k for k, _ in rows]
        columns = list(table.columns)
        if keys != self._rows:
            table.clear()
            self._shown.clear()
            for key, core in rows:
                cells = row_cells(core, self._bar_width)
                table.add_row(*cells, key=key)
                for col, cell in zip(columns, cells, strict=True):
                    self._shown[(key, col.value or "")] = (cell.plain, repr(cell.spans))
            self._rows = keys
            return
        for key, core in rows:  # only the cells whose text or colours changed
            for col, cell in zip(columns, row_cells(core, self._bar_width), strict=True):
                shown = (cell.plain, repr(cell.spans))
                if self._shown.get((key, col.value or "")) != shown:
                    self._shown[(key, col.value or "")] = shown
                    table.update_cell(key, col, cell)
