"""The top-down screen: one stacked bar per core and the all row, redrawing only the cells that changed."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.widgets import DataTable, Static

from pmutop.tui.format import WAITING
from pmutop.tui.model import ViewModel
from pmutop.tui.screens.base import VIEW_KEYS, ViewScreen
from pmutop.tui.topdown_view import FIXED_COLUMNS, SHORT, legend, measured_share, row_cells
from pmutop.tui.widgets.kept_lines import KeptFooter


class TopdownScreen(ViewScreen):
    # Its keys are the app's: 1/2/3/t and Esc select a view (priority bindings), Home/End move the highlight.
    BINDINGS: ClassVar[list[BindingType]] = [*VIEW_KEYS]

    def __init__(self) -> None:
        super().__init__()
        self._bar_width = 0
        self._rows: list[str] = []
        self._shown: dict[tuple[str, str], tuple[str, str]] = {}  # cell -> (text, styles) on screen

    def compose(self) -> ComposeResult:
        yield Static(id="tma-title")
        yield Static(legend(self.app.no_color), id="tma-legend")
        # The cells' colours win over the cursor's: the highlighted row keeps its breakdown.
        yield DataTable(id="tma", cursor_type="row", zebra_stripes=True, cursor_foreground_priority="renderable")
        yield KeptFooter()

    def on_mount(self) -> None:
        self._build(self.size.width)
        self.refresh_from(self.live.model)

    def on_resize(self, event: events.Resize) -> None:
        if self._build(event.size.width):
            self.refresh_from(self.live.model)

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
        if not self._bar_width:  # an interval that came before on_mount built the table: on_mount draws it
            return
        app = self.live
        title = Text("Top-down: where each core's issue slots go", style="bold")
        if app.info.simulated:
            title.append("   SIMULATED", style="bold black on yellow")
        if model.waiting:
            title.append(f"   {WAITING}", style="dim")
        elif not model.measures_topdown:
            why = app.info.topdown_off or "no core measures top-down here (see `pmutop info`)"
            title.append(f"   {why}", style="dim")
        elif (share := measured_share(model, app.info.core_types)) is not None:
            title.append(f"   all = {share} that measure top-down", style="dim")
        self.query_one("#tma-title", Static).update(title)
        table = self.query_one("#tma", DataTable)
        rows = [(str(cpu), core) for cpu, core in model.cores.items()] + [("total", model.total)]
        keys = [k for k, _ in rows]
        columns = list(table.columns)
        if keys != self._rows:
            table.clear()
            self._shown.clear()
            for key, core in rows:
                cells = row_cells(core, self._bar_width, self.app.no_color, app.info.topdown_off)
                table.add_row(*cells, key=key)
                for col, cell in zip(columns, cells, strict=True):
                    self._shown[(key, col.value or "")] = (cell.plain, repr(cell.spans))
            self._rows = keys
            return
        for key, core in rows:  # only the cells whose text or colours changed
            for col, cell in zip(
                columns, row_cells(core, self._bar_width, self.app.no_color, app.info.topdown_off), strict=True
            ):
                shown = (cell.plain, repr(cell.spans))
                if self._shown.get((key, col.value or "")) != shown:
                    self._shown[(key, col.value or "")] = shown
                    table.update_cell(key, col, cell)
