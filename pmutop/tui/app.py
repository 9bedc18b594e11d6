"""The live view. It never touches hardware: a worker waits for the samplers' rings to fill, then the
UI thread applies one update per interval, changing only the cells whose text changed."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from typing import ClassVar

from rich.console import RenderableType
from rich.table import Table as RichTable
from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.coordinate import Coordinate
from textual.screen import ModalScreen, Screen
from textual.widgets import DataTable, Footer, Static
from textual.widgets.data_table import CellDoesNotExist, ColumnKey, RowDoesNotExist, RowKey

from pmutop import topdown
from pmutop.engine.feed import SampleFeed
from pmutop.runinfo import RunInfo
from pmutop.sources.tasks import NoTasks, TaskSource, TopTask
from pmutop.tui import format as F
from pmutop.tui.columns import BY_KEY, COLUMN_FORMULAS, columns_for, layout, render_cell
from pmutop.tui.heatmap import HeatmapScreen
from pmutop.tui.model import CoreState, ViewModel
from pmutop.tui.plot import HistoryPlot
from pmutop.tui.topdown_view import COLOURS, TopdownScreen

HISTORY_WIDTH = 40  # cells of the detail view's top-down history

INTERVAL_STEPS = (0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0)
TOTAL_ROW = "total"
SCROLLBAR = 2

KEYS_HELP: tuple[tuple[str, str], ...] = (
    ("q, Ctrl+C", "quit (the PMU is restored first)"),
    ("space, p", "pause / resume the display (counting goes on)"),
    ("+", "longer interval"),
    ("-", "shorter interval"),
    ("s", "sort by the next column"),
    ("r", "reverse the sort"),
    ("click a header", "sort by that column (again: reverse)"),
    ("↑ ↓ PgUp PgDn Home End", "move the highlight"),
    ("Enter", "detail view of the highlighted core"),
    ("1", "the per-core table"),
    ("t, 2", "top-down view: where each core's issue slots go (t / Esc: back)"),
    ("3", "heatmap: cores down, time across; m: next metric (3 / Esc: back)"),
    ("Esc", "back to the table"),
    ("?, h", "this help"),
)


def machine_text(info: RunInfo) -> Text:
    cpu = info.cpu_model + (f" ({info.uarch})" if info.uarch else "")
    t = Text()
    t.append("pmutop ", style="bold")
    t.append(f"{info.hostname}  ", style="bold cyan")
    t.append(f"{cpu}  ·  {info.pmu}")
    return t


def status_text(info: RunInfo, feed: SampleFeed, sort_title: str, reverse: bool, paused: bool) -> Text:
    elapsed = feed.elapsed()
    arrow = "▼" if reverse else "▲"
    t = Text()
    t.append(f"{info.backend}/{info.read_method}", style="bold")
    t.append(f"  ·  interval {F.interval_text(feed.interval)}  ·  {F.duration(elapsed)}")
    t.append(f"  ·  sort {sort_title} {arrow}")
    return t


def banner_text(info: RunInfo, model: ViewModel, paused: bool) -> Text:
    t = Text()

    def badge(text: str, style: str) -> None:
        t.append(f" {text} ", style=style)
        t.append(" ")

    if info.simulated:
        badge("SIMULATED PMU: synthetic numbers", "bold black on yellow")
    if paused:
        badge("PAUSED", "bold black on cyan")
    if info.hardware_problem:
        badge("no hardware events: IPC and cache columns unavailable (pmutop info says why)", "bold white on red")
    if info.hypervisor:
        # Say what is true: a VM either passes a virtual PMU through or has no hardware counters at all.
        what = (
            "no hardware counters (kernel software events only)"
            if info.hardware_problem
            else "counters are virtualised"
        )
        badge(f"VM: {what}", "black on magenta")
    if info.watchdog_paused:
        badge("NMI watchdog paused for this run", "black on bright_blue")
    if model.overflow_count:
        badge(f"{model.overflow_count} counter overflows", "black on green")
    if model.total.suspect_count:
        badge(f"{model.total.suspect_count} suspect samples", "bold white on red")
    failed = sum(1 for c in model.cores.values() if c.error)
    if failed:
        badge(f"{failed} cores failed", "bold white on red")
    return t


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark,h", "dismiss", "Close"),
    ]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > Vertical { width: 72; height: auto; max-height: 90%; border: thick $accent; background: $surface;
                            padding: 1 2; }
    """

    def compose(self) -> ComposeResult:
        t = Text()
        t.append("pmutop keys\n\n", style="bold")
        for keys, what in KEYS_HELP:
            t.append(f"{keys:<16}", style="bold cyan")
            t.append(f"{what}\n")
        t.append("\nColours: red = low IPC / high MPKI / many misses; ? = suspect sample.", style="dim")
        with Vertical():
            yield Static(t, id="help-text")

    def action_dismiss(self) -> None:  # type: ignore[override]
        self.dismiss(None)


class DetailScreen(Screen[None]):
    """One core in depth: history plots, the last interval's raw deltas, overflow counts, formulas."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,enter", "app.pop_screen", "Back"),
        Binding("q", "app.quit", "Quit"),
        Binding("question_mark,h", "app.help", "Help"),
    ]
    DEFAULT_CSS = """
    DetailScreen #detail-title { height: 1; background: $boost; text-style: bold; padding: 0 1; }
    DetailScreen #plots { height: 1fr; min-height: 10; }
    DetailScreen .plot-row { height: 1fr; }
    DetailScreen #facts { height: auto; }
    DetailScreen #deltas { width: auto; height: auto; padding: 0 1; }
    DetailScreen #formulas { width: 1fr; height: auto; padding: 0 1; }
    """

    def __init__(self, cpu: int) -> None:
        super().__init__()
        self.cpu = cpu

    def compose(self) -> ComposeResult:
        yield Static(id="detail-title")
        with VerticalScroll():
            with Vertical(id="plots"):
                with Horizontal(classes="plot-row"):
                    yield HistoryPlot("IPC", lambda v: f"{v:.2f}", 4.0, "cyan", id="plot-ipc")
                    yield HistoryPlot("GHz", lambda v: f"{v:.2f}", 1.0, "green", id="plot-ghz")
                with Horizontal(classes="plot-row"):
                    yield HistoryPlot("Util %", lambda v: f"{v * 100:.0f}%", 1.0, "yellow", id="plot-util")
                    yield HistoryPlot("LLC miss/s", lambda v: F.si(v, 0), 1e6, "magenta", id="plot-llc")
            with Horizontal(id="facts"):
                yield Static(id="deltas")
                yield Static(id="formulas")
            yield Static(id="tma-detail")
        yield Footer()

    def on_mount(self) -> None:
        self.refresh_from(self.app.model)  # type: ignore[attr-defined]

    def refresh_from(self, model: ViewModel) -> None:
        app: PmutopApp = self.app  # type: ignore[assignment]
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
        for key, plot_id in (
            ("ipc", "plot-ipc"),
            ("ghz", "plot-ghz"),
            ("util", "plot-util"),
            ("llc_misses_per_s", "plot-llc"),
        ):
            # Scaled to this core (its shape is the point here); the table's sparklines compare cores.
            self.query_one(f"#{plot_id}", HistoryPlot).set_values(core.history[key])
        self.query_one("#deltas", Static).update(self._deltas(core))
        self.query_one("#formulas", Static).update(self._formulas())
        self.query_one("#tma-detail", Static).update(self._topdown(core))

    @staticmethod
    def _topdown(core: CoreState) -> RenderableType:
        """Level 1 history (one line each, 0..100%) and the latest level 2, where measured."""
        method = core.latest.topdown if core.latest is not None else None
        grid = RichTable.grid(padding=(0, 1))
        grid.add_column(style="bold", no_wrap=True)
        grid.add_column(no_wrap=True)
        grid.add_column(justify="right")
        if method is None:
            grid.add_row("top-down", Text("not measured on this core (see `pmutop info`)", style="dim"), "")
            return grid
        grid.add_row(Text(f"top-down ({method})", style="bold"), "history, 0..100%", "last")
        tma = core.tma or {}
        for k in topdown.LEVEL1:
            value = tma.get(k)
            grid.add_row(
                Text(topdown.LABELS[k], style=COLOURS[k]),
                Text(F.sparkline(core.history[k], HISTORY_WIDTH, 1.0), style=COLOURS[k]),
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
    def _formulas() -> RenderableType:
        grid = RichTable.grid(padding=(0, 1))
        grid.add_column(style="cyan", no_wrap=True)
        grid.add_column()
        grid.add_row(Text("formulas", style="bold"), "")
        for k, f in COLUMN_FORMULAS.items():
            grid.add_row(BY_KEY[k].title, f)
        grid.add_row("TSC Hz", "TSC ticks / wall seconds since the start")
        return grid


class PmutopApp(App[int]):
    TITLE = "pmutop"
    CSS = """
    #machine, #status { height: 1; background: $boost; padding: 0 1; text-wrap: nowrap; text-overflow: ellipsis; }
    #banner { height: 1; padding: 0 1; text-wrap: nowrap; text-overflow: ellipsis; }
    #banner.empty { display: none; }
    #cores { height: 1fr; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"),
        Binding("ctrl+c", "quit", "Quit", show=False, priority=True),
        Binding("space,p", "pause", "Pause"),
        Binding("space,p", "resume", "Resume"),  # the footer shows the one that applies
        Binding("plus,equals_sign", "slower", "+Interval"),
        Binding("minus", "faster", "-Interval"),
        Binding("s", "cycle_sort", "Sort"),
        Binding("r", "reverse_sort", "Reverse"),
        Binding("t,2", "topdown", "Top-down"),
        Binding("3", "heatmap", "Heatmap", show=False),
        Binding("1", "table", "Table", show=False),
        Binding("home", "first_row", "First", show=False, priority=True),
        Binding("end", "last_row", "Last", show=False, priority=True),
        Binding("question_mark,h", "help", "Help"),
    ]

    def __init__(self, feed: SampleFeed, info: RunInfo, tasks: TaskSource | None = None) -> None:
        super().__init__()
        self.feed = feed
        self.info = info
        self.tasks = tasks or NoTasks()
        self.model = ViewModel(feed.cpus, info.core_types)
        self.paused = False
        self.sort_key = "cpu"
        self.reverse = False
        self.widths: dict[str, int] = {}
        keys: list[str] = []
        for cpu in feed.cpus:  # hybrid CPUs may count different sets
            keys += [k for k in feed.keys(cpu) if k not in keys]
        self.columns = columns_for(keys)
        self.by_key = {c.key: c for c in self.columns}
        self.sortable = tuple(c.key for c in self.columns if c.sort_value is not None)
        self._cells: dict[tuple[str, str], str] = {}  # (row, column) -> plain text shown
        self._pending_tasks: dict[int, TopTask] | None = None
        self._stop = threading.Event()
        self.updates = 0  # UI updates applied (tests wait on it)
        self.failure: str | None = None  # one line for the user when the view itself broke
        self._loop: asyncio.AbstractEventLoop | None = None
        self._exit_wanted = False

    # -- building

    def compose(self) -> ComposeResult:
        yield Static(machine_text(self.info), id="machine")
        yield Static(id="status")
        yield Static(id="banner")
        yield DataTable(id="cores", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        self._loop = asyncio.get_running_loop()
        if self._exit_wanted:  # asked to stop before the UI was up
            self.exit(0)
            return
        self._build_table(self.size.width)
        self.apply_update(self._lookup_tasks())
        self.set_interval(1.0, self._refresh_header)
        self._watch_samples()

    def on_unmount(self) -> None:
        self._stop.set()

    def exit_soon(self) -> None:
        """From any thread, never blocking (pmutop.exitguard calls it on a signal): close the UI. If the
        UI cannot close (its terminal is gone), the guardian restores the PMU without it."""
        self._stop.set()
        self._exit_wanted = True
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self.exit, 0)

    def _handle_exception(self, error: Exception) -> None:
        """An error in the view ends the app with one line (printed by the CLI), not a traceback."""
        if os.environ.get("PMUTOP_DEBUG"):
            super()._handle_exception(error)
            return
        self.failure = (
            f"internal error in the live view: {error} (a bug in pmutop: please report it with the output of "
            "PMUTOP_DEBUG=1)"
        )
        self._stop.set()
        self._return_code = 1
        if self._exception is None:
            self._exception = error
            self._exception_event.set()
        self._close_messages_no_wait()

    def _rows(self):  # type: ignore[no-untyped-def]
        yield from ((str(cpu), core) for cpu, core in self.model.cores.items())
        yield TOTAL_ROW, self.model.total

    def _column_label(self, key: str) -> Text:
        col = self.by_key[key]
        title = col.title + (("▼" if self.reverse else "▲") if key == self.sort_key else "")
        return Text(title, justify=col.justify)  # type: ignore[arg-type]

    def _build_table(self, width: int) -> None:
        """(Re)create the columns for this width; rows keep their keys. Only on start and resize."""
        widths = layout(width - SCROLLBAR, self.columns)
        if widths == self.widths:
            return
        table = self.query_one(DataTable)
        cursor_row = self._cursor_row_key()
        self.widths = widths
        self._cells.clear()
        table.clear(columns=True)
        for key, w in widths.items():
            table.add_column(self._column_label(key), width=w, key=key)
        for row_key, core in self._rows():
            cells = [render_cell(k, core, self.model, w) for k, w in widths.items()]
            table.add_row(*cells, key=row_key)
            for k, cell in zip(widths, cells, strict=True):
                self._cells[(row_key, k)] = cell.plain
        self._sort()
        self._move_cursor_to(cursor_row)

    def on_resize(self, event) -> None:  # type: ignore[no-untyped-def]
        self._build_table(event.size.width)

    # -- data flow

    @work(thread=True, exclusive=True, group="samples")
    def _watch_samples(self) -> None:
        """Wait for each interval's samples, look up top tasks off the UI thread, post one update."""
        seen = {cpu: 0 for cpu in self.feed.cpus}
        while not self._stop.is_set():
            if not self.feed.wait_for_samples(seen, timeout=0.5):
                continue
            seen = {cpu: ring.count for cpu, ring in self.feed.rings.items()}
            tasks = self._lookup_tasks()
            if self._stop.is_set():
                return
            self.call_from_thread(self.apply_update, tasks)

    def _lookup_tasks(self) -> dict[int, TopTask]:
        try:
            return self.tasks.top_per_cpu()
        except Exception:  # a vanished process or permissions: the column just stays empty
            return {}

    def apply_update(self, tasks: dict[int, TopTask] | None) -> None:
        if tasks is not None:
            self._pending_tasks = tasks
        if self.paused:
            return
        changed = self.model.ingest(self.feed.rings)
        if self._pending_tasks is not None:
            self.model.set_tasks(self._pending_tasks)
        table = self.query_one(DataTable)
        with self.batch_update():
            for row_key, core in self._rows():
                for key, w in self.widths.items():
                    cell = render_cell(key, core, self.model, w)
                    if self._cells.get((row_key, key)) != cell.plain:
                        self._cells[(row_key, key)] = cell.plain
                        table.update_cell(row_key, key, cell)
            if changed and self.sort_key != "cpu":
                cursor_row = self._cursor_row_key()
                self._sort()
                self._move_cursor_to(cursor_row)
        self._announce()
        self._refresh_header()
        if isinstance(self.screen, (DetailScreen, TopdownScreen, HeatmapScreen)):
            self.screen.refresh_from(self.model)
        self.updates += 1

    def _announce(self) -> None:
        for message in self.model.new_errors:
            self.notify(message, title="core failed", severity="error", timeout=10)
        for message in self.model.new_suspects[:3]:
            self.notify(message, title="suspect sample", severity="warning", timeout=6)
        self.model.new_errors.clear()
        self.model.new_suspects.clear()

    def _refresh_header(self) -> None:
        self.query_one("#status", Static).update(
            status_text(self.info, self.feed, self.by_key[self.sort_key].title, self.reverse, self.paused)
        )
        banner = banner_text(self.info, self.model, self.paused)
        widget = self.query_one("#banner", Static)
        widget.update(banner)
        widget.set_class(not banner.plain, "empty")

    # -- sorting and the cursor

    def _cursor_row_key(self) -> str | None:
        table = self.query_one(DataTable)
        if not table.row_count:
            return None
        try:
            return table.coordinate_to_cell_key(Coordinate(table.cursor_row, 0)).row_key.value
        except CellDoesNotExist:
            return None

    def _move_cursor_to(self, row_key: str | None) -> None:
        if row_key is None:
            return
        table = self.query_one(DataTable)
        with contextlib.suppress(RowDoesNotExist):
            table.move_cursor(row=table.get_row_index(RowKey(row_key)), animate=False)

    def _sort(self) -> None:
        """Order rows by the sort column; the total row always stays last."""
        col = self.by_key[self.sort_key]
        cores = self.model.cores
        reverse = self.reverse

        def key(cpu_cell: Text) -> tuple[bool, float, int]:
            label = cpu_cell.plain.split()[0] if cpu_cell.plain.strip() else "all"
            if label == "all":
                return (not reverse, 0.0, 0)
            cpu = int(label)
            value = col.sort_value(cores[cpu]) if col.sort_value else cpu
            return (reverse, value, cpu)

        self.query_one(DataTable).sort("cpu", key=key, reverse=reverse)

    def _set_sort(self, key: str, reverse: bool) -> None:
        self.sort_key, self.reverse = key, reverse
        table = self.query_one(DataTable)
        for k in self.widths:
            table.columns[ColumnKey(k)].label = self._column_label(k)
        table.refresh()
        cursor_row = self._cursor_row_key()
        self._sort()
        self._move_cursor_to(cursor_row)
        self._refresh_header()

    @on(DataTable.HeaderSelected)
    def _header_clicked(self, event: DataTable.HeaderSelected) -> None:
        key = event.column_key.value or ""
        if key in self.sortable:
            self._set_sort(key, not self.reverse if key == self.sort_key else key != "cpu")

    @on(DataTable.RowSelected)
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        key = event.row_key.value
        if key:
            self.push_screen(DetailScreen(-1 if key == TOTAL_ROW else int(key)))

    # -- actions

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "pause":
            return not self.paused
        if action == "resume":
            return self.paused
        return True

    def action_pause(self) -> None:
        self.action_toggle_pause()

    def action_resume(self) -> None:
        self.action_toggle_pause()

    def action_toggle_pause(self) -> None:
        self.paused = not self.paused
        self.refresh_bindings()
        if not self.paused:
            self.apply_update(None)
        self._refresh_header()

    def action_slower(self) -> None:
        self._change_interval(+1)

    def action_faster(self) -> None:
        self._change_interval(-1)

    def _change_interval(self, step: int) -> None:
        now = self.feed.interval
        if step > 0:
            new = next((s for s in INTERVAL_STEPS if s > now + 1e-9), INTERVAL_STEPS[-1])
        else:
            new = next((s for s in reversed(INTERVAL_STEPS) if s < now - 1e-9), INTERVAL_STEPS[0])
        if new != now:
            self.feed.set_interval(new)
            self.model.mark_interval_change(now, new)
            self.notify(f"interval {F.interval_text(new)}", timeout=2)
        self._refresh_header()

    def action_cycle_sort(self) -> None:
        i = self.sortable.index(self.sort_key)
        key = self.sortable[(i + 1) % len(self.sortable)]
        self._set_sort(key, key != "cpu")  # metrics sort highest first, CPUs in order

    def action_reverse_sort(self) -> None:
        self._set_sort(self.sort_key, not self.reverse)

    def action_first_row(self) -> None:
        self.query_one("#cores", DataTable).move_cursor(row=0)

    def action_last_row(self) -> None:
        table = self.query_one("#cores", DataTable)
        table.move_cursor(row=table.row_count - 1)

    def action_table(self) -> None:
        """Back to the per-core table from any view (btop's numbered views)."""
        while len(self.screen_stack) > 1:
            self.pop_screen()

    def action_heatmap(self) -> None:
        if not isinstance(self.screen, HeatmapScreen):
            self.push_screen(HeatmapScreen())

    def action_topdown(self) -> None:
        if not isinstance(self.screen, TopdownScreen):
            self.push_screen(TopdownScreen())

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    async def action_quit(self) -> None:
        self._stop.set()
        self.exit(0)
