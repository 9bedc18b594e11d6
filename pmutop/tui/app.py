"""The live view. It never touches hardware: a worker waits for the samplers' rings to fill, then the
UI thread applies one update per interval, changing only the cells whose text changed."""

from __future__ import annotations

import asyncio
import contextlib
import os
import selectors
import signal
import threading
import time
from codecs import getincrementaldecoder
from dataclasses import replace
from pathlib import Path
from typing import ClassVar

from rich.console import RenderableType
from rich.table import Table as RichTable
from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.coordinate import Coordinate
from textual.css.query import NoMatches
from textual.screen import ModalScreen, Screen
from textual.widgets import DataTable, Footer, Input, Static
from textual.widgets.data_table import CellDoesNotExist, ColumnKey, RowDoesNotExist, RowKey

from pmutop.core.errors import PmutopError
from pmutop.core.feed import SampleFeed
from pmutop.core.heap_freeze import freeze_startup_heap
from pmutop.core.run_description import RunInfo
from pmutop.derive import topdown
from pmutop.derive.records import extra_events
from pmutop.probes.tasks import NoTasks, TaskSource, TopTask
from pmutop.tui import format as fmt
from pmutop.tui.columns import COLUMN_FORMULAS, POWER_KEYS, columns_for, layout, render_cell
from pmutop.tui.config import Settings
from pmutop.tui.config import save as save_settings
from pmutop.tui.fast_table import FastTable
from pmutop.tui.filter import RowFilter, parse_filter
from pmutop.tui.heatmap import BY_KEY as HEATMAP_METRICS
from pmutop.tui.heatmap import METRICS as HEATMAP_METRIC_LIST
from pmutop.tui.heatmap import HeatmapScreen
from pmutop.tui.history_panel import HistoryPanels, plot_specs
from pmutop.tui.model import CoreState, ViewModel
from pmutop.tui.pickers import ChoiceScreen, ColumnsScreen, FilterBar
from pmutop.tui.topdown_view import COLOURS, TopdownScreen

HISTORY_WIDTH = 40  # cells of the detail view's top-down history

INTERVAL_STEPS = (0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0)
TOTAL_ROW = "total"
SCROLLBAR = 2
MIN_SIZE = (40, 12)  # below this one line says the terminal is too small
PLOT_MIN_ROWS = 6  # a history panel: border, 3 plot rows, the time axis

KEYS_HELP: tuple[tuple[str, str], ...] = (
    ("q, F10, Ctrl+C", "quit (the PMU is restored first)"),
    ("space, p", "pause / resume the display (counting goes on)"),
    ("+ / -", "longer / shorter interval"),
    ("s, >  /  <", "sort by the next / previous column shown"),
    ("F6", "choose the sort column from a list"),
    ("r", "reverse the sort"),
    ("click a header", "sort by that column (again: reverse)"),
    ("/", "filter rows: 0-3,8  P  E  util>50  ipc<1  backend>40"),
    ("\\", "clear the filter"),
    ("c", "choose the columns shown"),
    ("↑ ↓ PgUp PgDn", "move the highlight (the plots follow it)"),
    ("Home End", "first / last row"),
    ("Enter", "detail view of the highlighted row"),
    ("1", "the per-core table"),
    ("2, t", "top-down view: where each core's issue slots go"),
    ("3", "heatmap: cores down, time across"),
    ("m", "choose the heatmap's metric"),
    ("Esc", "back to the table"),
    ("F1, ?, h", "this help"),
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
    t.append(f"  ·  interval {fmt.interval_text(feed.interval)}  ·  {fmt.duration(elapsed)}")
    t.append(f"  ·  sort {sort_title} {arrow}")
    return t


def banner_text(info: RunInfo, model: ViewModel, paused: bool) -> Text:
    t = Text()

    def badge(text: str, style: str) -> None:
        t.append(f" {text} ", style=style)
        t.append(" ")

    if info.replay:
        badge(f"REPLAY of {info.replay}", "bold white on blue")
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
        Binding("escape,q,question_mark,h,f1", "dismiss", "Close"),
    ]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 76; height: auto; max-height: 90%; border: thick $accent; background: $surface;
                            padding: 1 2; }
    """

    def compose(self) -> ComposeResult:
        t = Text()
        t.append("pmutop keys", style="bold")
        t.append("   (Esc, q or ? closes this help)\n\n", style="bold cyan")
        for keys, what in KEYS_HELP:
            t.append(f"{keys:<18}", style="bold cyan")
            t.append(f"{what}\n")
        t.append("\nColours: red = low IPC / high MPKI / many misses; ? = suspect sample.", style="dim")
        t.append("\nSettings (sort, columns, interval, view) are kept in ~/.config/pmutop/config.toml.", style="dim")

        with VerticalScroll():
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
    DetailScreen #facts { height: auto; }
    DetailScreen #deltas { width: auto; height: auto; padding: 0 1; }
    DetailScreen #formulas { width: 1fr; height: auto; padding: 0 1; }
    """

    def __init__(self, cpu: int) -> None:
        super().__init__()
        self.cpu = cpu

    def compose(self) -> ComposeResult:
        app: PmutopApp = self.app  # type: ignore[assignment]
        yield Static(id="detail-title")
        with VerticalScroll():
            yield HistoryPanels(app.plot_specs, prefix="detail", id="plots")
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
        # Scaled to this core (its shape is the point here); the table's sparklines compare cores.
        self.query_one("#plots", HistoryPanels).show(core, model, app.feed.interval)
        self.query_one("#deltas", Static).update(self._deltas(core))
        self.query_one("#formulas", Static).update(self._formulas(app.shown_formulas()))
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
                Text(fmt.sparkline(core.history[k], HISTORY_WIDTH, 1.0), style=COLOURS[k]),
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


class TooSmallScreen(Screen[None]):
    """Shown instead of any view while the terminal is below MIN_SIZE: one line, no broken layout."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("q", "app.quit", "Quit")]
    DEFAULT_CSS = "TooSmallScreen { align: center middle; } TooSmallScreen Static { width: auto; }"

    def compose(self) -> ComposeResult:
        yield Static(id="too-small")

    def show(self, width: int, height: int) -> None:
        need_w, need_h = MIN_SIZE
        self.query_one(Static).update(f"terminal too small ({width}x{height}): pmutop needs {need_w}x{need_h}")


def quick_exit_driver() -> type | None:
    """Textual's Linux driver, minus its wait on exit: the input thread polls stdin in 0.1 s steps and
    sleeps one more step on the way out, so joining it costs up to 0.2 s of every quit. pmutop never
    suspends the app, so the thread is told to stop and left to finish on its own."""
    try:
        import termios

        from textual._time import get_time
        from textual._xterm_parser import XTermParser
        from textual.drivers.linux_driver import LinuxDriver
    except ImportError:  # not Linux (or another Textual): Textual's default
        return None

    class QuickExitDriver(LinuxDriver):
        _wake_fd: int | None = None  # the write end of the input thread's wake-up pipe, while it is open
        _wake_lock = threading.Lock()  # never a write to a pipe the thread closed (or an fd reused since)

        def disable_input(self) -> None:
            if self.exit_event.is_set():
                return
            with contextlib.suppress(Exception):
                signal.signal(signal.SIGWINCH, signal.SIG_DFL)
                self._disable_mouse_support()
            self.exit_event.set()  # never cleared: the thread ends when woken
            with self._wake_lock, contextlib.suppress(OSError):
                if self._wake_fd is not None:
                    os.write(self._wake_fd, b"x")
            with contextlib.suppress(termios.error, OSError):
                termios.tcflush(self.fileno, termios.TCIFLUSH)

        def run_input_thread(self) -> None:
            """Textual's input loop wakes every 0.1 s to see whether a lone Escape has timed out: ten
            wake-ups a second for nothing. This one sleeps until input arrives, waits only as long as an
            unfinished escape sequence needs, and is woken by a pipe to exit."""
            parser = XTermParser(self._debug)
            decode = getincrementaldecoder("utf-8")().decode
            wake_r, self._wake_fd = os.pipe()
            selector = selectors.DefaultSelector()
            selector.register(self.fileno, selectors.EVENT_READ)
            selector.register(wake_r, selectors.EVENT_READ)
            try:
                while not self.exit_event.is_set():
                    due = getattr(parser, "_timeout_time", 0.0)  # when a pending sequence times out
                    timeout = None if due is None else max(0.0, due - get_time()) if due else 0.1
                    for key, _ in selector.select(timeout):
                        if key.fd != self.fileno:
                            continue
                        data = os.read(self.fileno, 4096)
                        if not data:  # the terminal is gone: nothing more will come
                            return
                        for event in parser.feed(decode(data)):
                            self.process_message(event)
                    for event in parser.tick():
                        self.process_message(event)
            finally:
                selector.close()
                with self._wake_lock:
                    wake_fd, self._wake_fd = self._wake_fd, None
                    for fd in (wake_r, wake_fd):
                        with contextlib.suppress(OSError):
                            os.close(fd)  # type: ignore[arg-type]

    return QuickExitDriver


class PmutopApp(App[int]):
    TITLE = "pmutop"
    CSS = """
    #machine, #status { height: 1; background: $boost; padding: 0 1; text-wrap: nowrap; text-overflow: ellipsis; }
    #banner { height: 1; padding: 0 1; text-wrap: nowrap; text-overflow: ellipsis; }
    #banner.empty { display: none; }
    #cores { height: 1fr; }
    #history { height: 1fr; }
    #filter { height: 1; border: none; padding: 0 1; background: $boost; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q,f10", "quit", "Quit"),
        Binding("ctrl+c", "quit", "Quit", show=False, priority=True),
        Binding("space,p", "pause", "Pause"),
        Binding("space,p", "resume", "Resume"),  # the footer shows the one that applies
        Binding("plus,equals_sign", "slower", "+Interval"),
        Binding("minus", "faster", "-Interval"),
        Binding("s,greater_than_sign", "next_sort", "Sort"),
        Binding("less_than_sign", "previous_sort", "Sort back", show=False),
        Binding("f6", "choose_sort", "Sort by", show=False),
        Binding("r", "reverse_sort", "Reverse"),
        Binding("slash", "filter", "Filter"),
        Binding("backslash", "clear_filter", "Clear filter", show=False),
        Binding("c", "choose_columns", "Columns"),
        Binding("m", "choose_metric", "Heatmap metric", show=False),
        Binding("t,2", "topdown", "Top-down"),
        Binding("3", "heatmap", "Heatmap", show=False),
        Binding("1", "table", "Table", show=False),
        Binding("home", "first_row", "First", show=False, priority=True),
        Binding("end", "last_row", "Last", show=False, priority=True),
        Binding("question_mark,h,f1", "help", "Help"),
    ]
    # Actions of the table screen only (other views have their own keys for these letters, or none).
    TABLE_ONLY = frozenset(
        {
            "next_sort",
            "previous_sort",
            "choose_sort",
            "reverse_sort",
            "filter",
            "clear_filter",
            "choose_columns",
            "first_row",
            "last_row",
            "pause",
            "resume",
            "slower",
            "faster",
        }
    )

    def __init__(
        self,
        feed: SampleFeed,
        info: RunInfo,
        tasks: TaskSource | None = None,
        *,
        settings: Settings | None = None,
        settings_path: Path | None = None,
        settings_problem: str | None = None,
    ) -> None:
        """`settings_path` None: settings are not saved (tests, screenshots); `settings_problem`: the one
        line to show about an unusable config file."""
        super().__init__(driver_class=quick_exit_driver())
        self.feed = feed
        self.info = info
        self.tasks = tasks or NoTasks()
        self.settings = settings or Settings()
        self.settings_path = settings_path
        self.settings_problem = settings_problem
        keys: list[str] = []
        for cpu in feed.cpus:  # hybrid CPUs may count different sets
            keys += [k for k in feed.keys(cpu) if k not in keys]
        self.keys = keys
        rate_keys = tuple(extra_events(keys))
        # A remote feed (pmutop --connect) names its rows "host:cpu"; its CPU ids keep each host's rows together.
        self.names: dict[int, str] = getattr(feed, "labels", {})
        self.model = ViewModel(feed.cpus, info.core_types, rate_keys, self.names)
        self.plot_specs = plot_specs(keys, rate_keys)
        self.paused = False
        self.power_fields: frozenset[str] = frozenset()  # turbostat-style fields the samples carry
        self._power_checks = 0
        self.columns = columns_for(keys)
        if self.names:
            wide = max(len(n) for n in self.names.values()) + 2
            self.columns = tuple(
                replace(c, min_width=wide, max_width=wide) if c.key == "cpu" else c for c in self.columns
            )
        self.by_key = {c.key: c for c in self.columns}
        self.sort_key = self.settings.sort if self.settings.sort in self.by_key else "cpu"
        if self.by_key[self.sort_key].sort_value is None:
            self.sort_key = "cpu"
        self.reverse = self.settings.reverse
        self.hidden = {k for k in self.settings.hidden_columns if k in self.by_key and k != "cpu"}
        self.widths: dict[str, int] = {}
        self.dropped = 0  # columns that do not fit the width (the "+N columns" marker)
        self.row_filter: RowFilter | None = None
        self._shown_rows: list[str] = []  # row keys in the table, in display order
        self._cells: dict[tuple[str, str], str] = {}  # (row, column) -> plain text shown
        self._stale: set[str] = set()  # rows off screen whose cells were not refreshed
        self._pending_tasks: dict[int, TopTask] | None = None
        self._stop = threading.Event()
        self.updates = 0  # UI updates applied (tests wait on it)
        self._numbers_shown = False  # the first samples have been shown
        self.failure: str | None = None  # one line for the user when the view itself broke
        self._loop: asyncio.AbstractEventLoop | None = None
        self._exit_wanted = False
        self._plotted: str | None = None  # the row the history panels show
        self._follow: str | None = None  # None: the all row, until the user moves the highlight
        self._last_highlight: str | None = None
        self._header_drawn = 0.0  # monotonic time of the last header redraw

    # -- building

    def compose(self) -> ComposeResult:
        yield Static(machine_text(self.info), id="machine")
        yield Static(id="status")
        yield Static(id="banner")
        yield FastTable(id="cores", cursor_type="row", zebra_stripes=True)
        yield HistoryPanels(self.plot_specs, id="history")
        bar = FilterBar(
            placeholder="filter: 0-3,8  P  util>50  ipc<1 (Enter: apply, Esc: close, \\: clear)", id="filter"
        )
        bar.display = False
        yield bar
        yield Footer()

    def on_mount(self) -> None:
        self._loop = asyncio.get_running_loop()
        if self._exit_wanted:  # asked to stop before the UI was up
            self.exit(0)
            return
        self._build_table(self.size.width)
        self.apply_update(self._lookup_tasks())
        self.set_interval(1.0, self._tick_clock)
        self._watch_samples()
        table = self.query_one("#cores", DataTable)
        self.watch(table, "scroll_y", self._refresh_stale_rows, init=False)
        if self.settings_problem:
            self.notify(self.settings_problem, title="settings", severity="warning", timeout=10)
        if self.settings.view == "topdown":
            self.action_topdown()
        elif self.settings.view == "heatmap":
            self.action_heatmap()
        self._check_size(self.size.width, self.size.height)

    def on_unmount(self) -> None:
        self._stop_watching()

    def _stop_watching(self) -> None:
        """End the sample watcher now, not at its next timeout: quitting waits for that thread."""
        self._stop.set()
        self.feed.wake_waiters()

    def exit_soon(self) -> None:
        """From any thread, never blocking (pmutop.safety.exit_guard calls it on a signal): close the UI. If the
        UI cannot close (its terminal is gone), the guardian restores the PMU without it."""
        self._stop_watching()
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
        self._stop_watching()
        self._return_code = 1
        if self._exception is None:
            self._exception = error
            self._exception_event.set()
        self._close_messages_no_wait()

    def _core_for(self, row_key: str) -> CoreState:
        return self.model.total if row_key == TOTAL_ROW else self.model.cores[int(row_key)]

    def _wanted_rows(self) -> list[str]:
        """Row keys that pass the filter, in CPU order; the all row last."""
        f = self.row_filter
        rows = [str(cpu) for cpu, core in self.model.cores.items() if f is None or f.matches(core)]
        return [*rows, TOTAL_ROW]

    def _column_label(self, key: str) -> Text:
        col = self.by_key[key]
        title = col.title + (("▼" if self.reverse else "▲") if key == self.sort_key else "")
        return Text(title, justify=col.justify)  # type: ignore[arg-type]

    def _build_table(self, width: int, force: bool = False) -> None:
        """(Re)create the columns for this width; rows keep their keys. On start, resize, column choice."""
        chosen = tuple(c for c in self.columns if c.key not in self.hidden)
        widths = layout(width - SCROLLBAR, chosen)
        self.dropped = len(chosen) - len(widths)
        if widths == self.widths and not force:
            return
        table = self.query_one("#cores", DataTable)
        cursor_row = self._cursor_row_key()
        self.widths = widths
        self._cells.clear()
        table.clear(columns=True)
        for key, w in widths.items():
            table.add_column(self._column_label(key), width=w, key=key)
        self._shown_rows = []
        self._sync_rows()
        self._move_cursor_to(cursor_row)
        self._refresh_header()

    def _add_row(self, row_key: str) -> None:
        core = self._core_for(row_key)
        cells = [render_cell(k, core, self.model, w) for k, w in self.widths.items()]
        self.query_one("#cores", DataTable).add_row(*cells, key=row_key)
        for k, cell in zip(self.widths, cells, strict=True):
            self._cells[(row_key, k)] = cell.plain

    def _sync_rows(self) -> bool:
        """Add and remove rows so the table holds exactly the filtered rows, then order them. True when
        the set of rows changed."""
        wanted = self._wanted_rows()
        have = set(self._shown_rows)
        changed = set(wanted) != have
        if changed:
            table = self.query_one("#cores", DataTable)
            for row_key in have - set(wanted):
                with contextlib.suppress(RowDoesNotExist):
                    table.remove_row(row_key)
                for k in self.widths:
                    self._cells.pop((row_key, k), None)
            for row_key in wanted:
                if row_key not in have:
                    self._add_row(row_key)
            self._shown_rows = [r for r in self._shown_rows if r in wanted] + [r for r in wanted if r not in have]
            self._fit()
        self._sort(force=changed)
        return changed

    def on_resize(self, event) -> None:  # type: ignore[no-untyped-def]
        self._check_size(event.size.width, event.size.height)
        self._build_table(event.size.width)
        self._fit()

    def _check_size(self, width: int, height: int) -> None:
        too_small = width < MIN_SIZE[0] or height < MIN_SIZE[1]
        top = self.screen
        if too_small:
            if not isinstance(top, TooSmallScreen):
                self.push_screen(TooSmallScreen())
            self.call_after_refresh(lambda: self._show_too_small(width, height))
        elif isinstance(top, TooSmallScreen):
            self.pop_screen()

    def _show_too_small(self, width: int, height: int) -> None:
        if isinstance(self.screen, TooSmallScreen):
            self.screen.show(width, height)

    def _fit(self) -> None:
        """The table as tall as its rows when the history panels then still get room; else all table."""
        if not self.is_mounted:
            return
        table = self.query_one("#cores", DataTable)
        panels = self.query_one("#history", HistoryPanels)
        chrome = 3 + (0 if self.query_one("#banner").has_class("empty") else 1)
        chrome += 1 if self.query_one("#filter").display else 0
        avail = self.size.height - chrome
        rows = len(self._shown_rows) + 1  # + the header
        show = bool(self.plot_specs) and avail - rows >= PLOT_MIN_ROWS
        if show:
            table.styles.height = rows
        else:
            table.styles.height = "1fr"
        panels.display = show
        self.call_after_refresh(self._refresh_stale_rows)  # rows the new height brings into view

    # -- data flow

    @work(thread=True, exclusive=True, group="samples")
    def _watch_samples(self) -> None:
        """Wait for each interval's samples, look up top tasks off the UI thread, post one update."""
        seen = {cpu: 0 for cpu in self.feed.cpus}
        while not self._stop.is_set():
            if not self.feed.wait_for_samples(seen, timeout=0.5, stop=self._stop):
                continue
            seen = {cpu: ring.count for cpu, ring in self.feed.rings.items()}
            tasks = None if self.paused else self._lookup_tasks()  # nothing to show it on while paused
            if self._stop.is_set():
                return
            self.call_from_thread(self.apply_update, tasks)

    def _lookup_tasks(self) -> dict[int, TopTask]:
        try:
            return self.tasks.top_per_cpu()
        except Exception:  # a vanished process or permissions: the column just stays empty
            return {}

    def _visible_rows(self) -> set[str]:
        """Row keys on screen now (with a row of margin): only these are re-rendered each interval."""
        table = self.query_one("#cores", DataTable)
        if not table.size.height:  # not laid out yet: all of them
            return set(self._shown_rows)
        first = int(table.scroll_y)
        last = first + table.size.height + 1
        return set(self._shown_rows_in_order()[max(0, first - 1) : last])

    def _shown_rows_in_order(self) -> list[str]:
        table = self.query_one("#cores", DataTable)
        return [str(r.key.value) for r in table.ordered_rows]

    def _update_rows(self, rows: set[str]) -> None:
        changes = []
        for row_key in rows:
            core = self._core_for(row_key)
            for key, w in self.widths.items():
                cell = render_cell(key, core, self.model, w)
                if self._cells.get((row_key, key)) != cell.plain:
                    self._cells[(row_key, key)] = cell.plain
                    changes.append((row_key, key, cell))
        self.query_one("#cores", FastTable).set_cells(changes)

    def _refresh_stale_rows(self, *_: object) -> None:
        visible = self._visible_rows() & self._stale
        if visible:
            self._stale -= visible
            with self.batch_update():
                self._update_rows(visible)

    def apply_update(self, tasks: dict[int, TopTask] | None) -> None:
        if self._stop.is_set():  # closing: the widgets may already be gone
            return
        try:
            self._apply_update(tasks)
        except NoMatches:  # an update that arrived while the app was closing
            if self.is_running and self.screen.is_mounted:  # not closing: a real bug
                raise

    def _apply_update(self, tasks: dict[int, TopTask] | None) -> None:
        if tasks is not None:
            self._pending_tasks = tasks
        if self.paused:
            return
        changed = self.model.ingest(self.feed.rings)
        if changed and self._power_checks < 3:  # what the power sources measure shows in the first samples
            self._power_checks += 1
            self._add_power_columns()
        if self._pending_tasks is not None:
            self.model.set_tasks(self._pending_tasks)
        if isinstance(self.screen, (DetailScreen, TopdownScreen, HeatmapScreen)):
            self.screen.refresh_from(self.model)  # the table is hidden: its rows wait
            self._stale = set(self._shown_rows)
        else:
            with self.batch_update():
                rows_changed = self._sync_rows() if (changed and self.row_filter is not None) else False
                if changed and not rows_changed:
                    self._sort()
                visible = self._visible_rows()
                self._stale = (self._stale | set(self._shown_rows)) - visible
                self._update_rows(visible)
                self._refresh_panels()
        self._announce()
        self._refresh_header()
        self.updates += 1
        if changed and not self._numbers_shown:  # the first numbers are on screen: start-up is over
            self._numbers_shown = True
            self.call_after_refresh(freeze_startup_heap)

    def _add_power_columns(self) -> None:
        """Busy%, BzyMHz, °C and PkgW columns for the fields some CPU's samples measure."""
        fields = set()
        for core in self.model.cores.values():
            if core.latest is not None:
                fields.update(core.latest.power_src)
        if "energy_j" in fields or any(f.startswith("energy") for f in fields):
            fields.add("pkg_watts")
        measured = frozenset(fields & POWER_KEYS)
        if measured <= self.power_fields:
            return
        self.power_fields = measured | self.power_fields
        self.columns = columns_for(self.keys, self.power_fields)
        self.by_key = {c.key: c for c in self.columns}
        self._build_table(self.size.width, force=True)

    def _refresh_panels(self) -> None:
        panels = self.query_one("#history", HistoryPanels)
        if not panels.display:
            return
        row_key = self._follow or TOTAL_ROW
        if row_key not in self._shown_rows:
            row_key = TOTAL_ROW
        core = self._core_for(row_key)
        who = "all CPUs" if row_key == TOTAL_ROW else f"cpu {core.label}"
        panels.show(core, self.model, self.feed.interval, who)
        self._plotted = row_key

    @on(DataTable.RowHighlighted)
    def _row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        key = event.row_key.value
        # The table highlights its first row by itself, and again when rebuilt: only a move to another
        # row is the user's choice of what the panels show.
        previous, self._last_highlight = self._last_highlight, key
        if previous is None or key == previous:
            return
        if key != self._plotted:
            self._follow = key
            self._refresh_panels()

    def on_screen_resume(self) -> None:
        if self._stale:
            self.call_after_refresh(self._refresh_stale_rows)

    def _announce(self) -> None:
        for message in dict.fromkeys(self.model.new_errors):  # a lost host: one message, not one per CPU
            self.notify(message, title="core failed", severity="error", timeout=10)
        for message in self.model.new_suspects[:3]:
            self.notify(message, title="suspect sample", severity="warning", timeout=6)
        self.model.new_errors.clear()
        self.model.new_suspects.clear()

    def _tick_clock(self) -> None:
        """The run clock between samples (paused, or intervals over 1 s); an update redraws it anyway, and a
        second redraw per second would cost a second screen refresh."""
        if time.monotonic() - self._header_drawn >= 0.9:
            self._refresh_header()

    def _set_line(self, widget_id: str, text: Text) -> None:
        """Show `text` on a one-line Static: nothing to do when unchanged, no layout pass when changed."""
        widget = self.query_one(widget_id, Static)
        if widget.content != text:
            widget.update(text, layout=False)

    def _extend_status(self, status: Text) -> None:
        """More for the status line (the replay's position and speed)."""

    def _refresh_header(self) -> None:
        self._header_drawn = time.monotonic()
        if not self.is_mounted or self._stop.is_set():
            return
        with contextlib.suppress(NoMatches):  # the 1 s timer fired while the app was closing
            self._draw_header()

    def _draw_header(self) -> None:
        sort_title = self.by_key[self.sort_key].title
        if self.sort_key not in self.widths:
            sort_title += " (hidden column)"
        status = status_text(self.info, self.feed, sort_title, self.reverse, self.paused)
        if self.row_filter is not None:
            shown = len(self._shown_rows) - 1
            status.append(f"  ·  filter {self.row_filter.text}: {shown}/{len(self.model.cores)}", style="bold yellow")
        if self.dropped:
            status.append(f"  ·  +{self.dropped} columns (c)", style="dim")
        self._extend_status(status)
        self._set_line("#status", status)
        banner = banner_text(self.info, self.model, self.paused)
        for line in getattr(self.feed, "lost", list)():  # remote hosts that do not answer now
            banner.append(f" {line} ", style="bold white on red")
            banner.append(" ")
        self._set_line("#banner", banner)
        widget = self.query_one("#banner", Static)
        empty = not banner.plain
        if widget.has_class("empty") != empty:
            widget.set_class(empty, "empty")
            self._fit()

    # -- settings

    def _save_settings(self) -> None:
        if self.settings_path is None:
            return
        problem = save_settings(self.settings, self.settings_path)
        if problem:
            self.settings_path = None  # say it once
            self.notify(problem, title="settings", severity="warning", timeout=8)

    def _remember(self, **changes: object) -> None:
        for k, v in changes.items():
            setattr(self.settings, k, v)
        self._save_settings()

    # -- sorting and the cursor

    def _cursor_row_key(self) -> str | None:
        table = self.query_one("#cores", DataTable)
        if not table.row_count:
            return None
        try:
            return table.coordinate_to_cell_key(Coordinate(table.cursor_row, 0)).row_key.value
        except CellDoesNotExist:
            return None

    def _move_cursor_to(self, row_key: str | None) -> None:
        if row_key is None:
            return
        table = self.query_one("#cores", DataTable)
        with contextlib.suppress(RowDoesNotExist):
            table.move_cursor(row=table.get_row_index(RowKey(row_key)), animate=False)

    def _order(self) -> list[str]:
        """Row keys in the order the sort asks for; the all row always last."""
        col = self.by_key[self.sort_key]
        cores = self.model.cores
        rows = [r for r in self._shown_rows if r != TOTAL_ROW]
        if col.sort_value is None or col.key == "cpu":
            ordered = sorted(rows, key=int, reverse=self.reverse)
        else:
            value = col.sort_value
            # Missing values (-inf) go last whichever way; ties keep CPU order.
            ordered = sorted(rows, key=lambda r: (value(cores[int(r)]), -int(r)), reverse=True)
            if not self.reverse:
                ordered.reverse()
        return [*ordered, TOTAL_ROW]

    def _sort(self, force: bool = False) -> None:
        """Reorder the table only when the order changed (dolphie's habit: most intervals it does not)."""
        order = self._order()
        if not force and order == self._shown_rows_in_order():
            return
        rank = {r: i for i, r in enumerate(order)}
        cursor_row = self._cursor_row_key()
        self.query_one("#cores", DataTable).sort(key=lambda row: rank.get(row_key_of(row), len(rank)))
        self._move_cursor_to(cursor_row)

    def _set_sort(self, key: str, reverse: bool) -> None:
        self.sort_key, self.reverse = key, reverse
        table = self.query_one("#cores", DataTable)
        for k in self.widths:
            table.columns[ColumnKey(k)].label = self._column_label(k)
        table.refresh()
        self._sort(force=True)
        self._refresh_header()
        self._remember(sort=key, reverse=reverse)

    def _visible_sortable(self) -> list[str]:
        """Sortable columns on screen: `s`, `<`, `>` and F6 never pick a hidden one."""
        return [k for k in self.widths if self.by_key[k].sort_value is not None]

    @on(DataTable.HeaderSelected)
    def _header_clicked(self, event: DataTable.HeaderSelected) -> None:
        key = event.column_key.value or ""
        if self.by_key.get(key) is not None and self.by_key[key].sort_value is not None:
            self._set_sort(key, not self.reverse if key == self.sort_key else key != "cpu")

    @on(DataTable.RowSelected)
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        key = event.row_key.value
        if key:
            self.push_screen(DetailScreen(-1 if key == TOTAL_ROW else int(key)))

    def shown_formulas(self) -> list[tuple[str, str]]:
        """The formulas behind the columns this run fills (util from the kernel when no ref cycles)."""
        out = []
        for c in self.columns:
            formula = COLUMN_FORMULAS.get(c.key)
            if c.key == "util" and "ref_cycles" not in self.keys:
                formula = "100 × busy / total from the kernel's per-CPU times (/proc/stat)"
            if c.key.startswith("ev:"):
                formula = f"{c.key[3:]} / interval seconds"
            if formula:
                out.append((c.title, formula))
        if "ref_cycles" in self.keys:
            out.append(("TSC Hz", "TSC ticks / wall seconds since the start"))
        return out

    # -- actions

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        on_table = self.screen is self.screen_stack[0]
        if action in self.TABLE_ONLY:
            if not on_table:
                return False
            if action in ("first_row", "last_row") and self.query_one("#filter").has_focus:
                return False  # Home/End move the filter's cursor
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
            self.notify(f"interval {fmt.interval_text(new)}", timeout=2)
            self._remember(interval=new)
        self._refresh_header()

    def _step_sort(self, step: int) -> None:
        keys = self._visible_sortable()
        i = keys.index(self.sort_key) if self.sort_key in keys else -1 if step > 0 else 0
        key = keys[(i + step) % len(keys)]
        self._set_sort(key, key != "cpu")  # metrics sort highest first, CPUs in order

    def action_next_sort(self) -> None:
        self._step_sort(+1)

    def action_previous_sort(self) -> None:
        self._step_sort(-1)

    def action_choose_sort(self) -> None:
        choices = [(k, self.by_key[k].title) for k in self._visible_sortable()]

        def chosen(key: str | None) -> None:
            if key:
                self._set_sort(key, key != "cpu")

        self.push_screen(ChoiceScreen("Sort by", choices, self.sort_key), chosen)

    def action_reverse_sort(self) -> None:
        self._set_sort(self.sort_key, not self.reverse)

    def action_choose_columns(self) -> None:
        columns = [(c.key, c.title) for c in self.columns]
        shown = {c.key for c in self.columns if c.key not in self.hidden}

        def chosen(keys: list[str] | None) -> None:
            if keys is None:
                return
            self.hidden = {c.key for c in self.columns if c.key not in keys and c.key != "cpu"}
            self._build_table(self.size.width, force=True)
            self._remember(hidden_columns=sorted(self.hidden))

        self.push_screen(ColumnsScreen(columns, shown, {"cpu"}), chosen)

    def action_filter(self) -> None:
        bar = self.query_one("#filter", FilterBar)
        bar.display = True
        bar.value = self.row_filter.text if self.row_filter else ""
        self.set_focus(bar)  # now, not later: the keys typed right after "/" belong to the filter
        self._fit()

    @on(Input.Submitted, "#filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        try:
            self.row_filter = parse_filter(event.value)
        except PmutopError as e:
            self.notify(str(e), title="filter", severity="error", timeout=6)
            return
        bar = self.query_one("#filter", FilterBar)
        bar.display = False
        self.query_one("#cores", DataTable).focus()
        self._apply_filter()

    def action_clear_filter(self) -> None:
        self.row_filter = None
        bar = self.query_one("#filter", FilterBar)
        bar.value = ""
        bar.display = False
        self.query_one("#cores", DataTable).focus()
        self._apply_filter()

    def _apply_filter(self) -> None:
        with self.batch_update():
            self._sync_rows()
            self._update_rows(self._visible_rows())
        self._fit()
        self._refresh_header()
        self._refresh_panels()

    def action_first_row(self) -> None:
        self.query_one("#cores", DataTable).move_cursor(row=0)

    def action_last_row(self) -> None:
        table = self.query_one("#cores", DataTable)
        table.move_cursor(row=table.row_count - 1)

    def action_table(self) -> None:
        """Back to the per-core table from any view (btop's numbered views)."""
        while len(self.screen_stack) > 1 and not isinstance(self.screen, TooSmallScreen):
            self.pop_screen()
        self._remember(view="table")

    def action_heatmap(self, metric: str | None = None) -> None:
        metric = metric or self.settings.heatmap_metric
        if isinstance(self.screen, HeatmapScreen):
            if metric:
                self.screen.set_metric(metric)
        else:
            self.push_screen(HeatmapScreen(metric if metric in HEATMAP_METRICS else "ipc"))
        self._remember(view="heatmap")

    def action_choose_metric(self) -> None:
        current = self.screen.metric.key if isinstance(self.screen, HeatmapScreen) else self.settings.heatmap_metric

        def chosen(key: str | None) -> None:
            if key:
                self.settings.heatmap_metric = key
                self.action_heatmap(key)

        choices = [(m.key, m.title) for m in HEATMAP_METRIC_LIST]
        self.push_screen(ChoiceScreen("Heatmap metric", choices, current), chosen)

    def action_topdown(self) -> None:
        if not isinstance(self.screen, TopdownScreen):
            self.push_screen(TopdownScreen())
        self._remember(view="topdown")

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    async def action_quit(self) -> None:
        self._stop_watching()
        self.exit(0)


def row_key_of(row: object) -> str:
    """DataTable.sort passes the row's cells: the first is the CPU label ("3 P", "all")."""
    cell = row[0] if isinstance(row, (list, tuple)) else row
    text = cell.plain if isinstance(cell, Text) else str(cell)
    label = text.split()[0] if text.strip() else TOTAL_ROW
    return TOTAL_ROW if label == "all" else label
