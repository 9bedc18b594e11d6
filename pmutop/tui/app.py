"""The live view. It never touches hardware: a worker waits for the samplers' rings to fill, then the
UI thread applies one update per interval, changing only the cells whose text changed.

The app composes the widgets and wires keys and events to the parts that do the work: the table's logic
(pmutop.tui.table_controller), the header texts (pmutop.tui.header), the screens (pmutop.tui.screens),
and what needs Textual's private API (pmutop.tui.textual_private)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import DataTable, Input

from pmutop.core.dram_reading import PackageFeed
from pmutop.core.errors import PmutopError
from pmutop.core.feed import HostLabels, LostHosts, SampleFeed
from pmutop.core.heap_freeze import freeze_startup_heap
from pmutop.core.own_cost import OwnCostMeter
from pmutop.core.run_description import RunInfo
from pmutop.core.task_reading import TaskFeed, TaskStarter
from pmutop.core.user_turn import USER_TURN
from pmutop.derive.records import extra_events
from pmutop.probes.tasks import NoTasks, TaskSource, TopTask
from pmutop.tui import format as fmt
from pmutop.tui import interval_readings
from pmutop.tui.config import Settings
from pmutop.tui.filter import parse_filter
from pmutop.tui.header import machine_text
from pmutop.tui.header_view import HeaderView
from pmutop.tui.model import ViewModel
from pmutop.tui.screens.base import ViewScreen
from pmutop.tui.screens.detail import DetailScreen
from pmutop.tui.screens.heatmap import HeatmapScreen
from pmutop.tui.screens.help import HelpScreen
from pmutop.tui.screens.pickers import ChoiceScreen, ColumnsScreen
from pmutop.tui.screens.too_small import TooSmallScreen, check_size
from pmutop.tui.table_controller import PACKAGE_ROW, TOTAL_ROW, CoreTable
from pmutop.tui.textual_private import end_after_error, quick_exit_driver
from pmutop.tui.widgets.fast_table import FastTable
from pmutop.tui.widgets.filter_bar import FilterBar
from pmutop.tui.widgets.history_panel import HistoryPanels, plot_specs
from pmutop.tui.widgets.kept_lines import KeptFooter, KeptScreen, KeptStatic

INTERVAL_STEPS = (0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0)
PLOT_MIN_ROWS = 6  # a history panel: border, 3 plot rows, the time axis


class PmutopApp(HeaderView):
    TITLE = "pmutop"
    CSS_PATH = Path(__file__).with_name("app.tcss")  # every style of the live view and its screens
    ENABLE_COMMAND_PALETTE = False  # every action has a key (and `?` lists them): its footer room goes to Help
    # The footer shows these in this order and cuts what does not fit: Help and Quit first, so they are
    # there at 80 columns. Keys that open a dialog or a view are priority bindings: the app handles them
    # in turn with the keys typed after them, which then reach the new dialog, not the table. So are the
    # table's own keys: the app acts on them when it first gets them, not after forwarding them to the
    # focused table and back, which put a frame already due (at 256 CPUs an interval's update, ~10 ms) before
    # the key's answer. A focused filter line still gets its letters (Textual leaves it the keys it types).
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("question_mark,h,f1", "help", "Help", priority=True),
        Binding("q,f10", "quit", "Quit"),
        Binding("ctrl+c", "ctrl_c", "Quit", show=False, priority=True),
        Binding("p,space", "pause", "Pause", priority=True),  # p first: the footer's shortest key name
        Binding("p,space", "resume", "Resume", priority=True),  # the footer shows the one that applies
        # Not priority: Textual does not count + and - as characters a focused filter line types (0-2).
        Binding("plus,equals_sign", "slower", "Interval", key_display="+/-"),
        Binding("minus", "faster", "Shorter interval", show=False),
        Binding("s,greater_than_sign", "next_sort", "Sort", priority=True),
        Binding("less_than_sign", "previous_sort", "Sort back", show=False, priority=True),
        Binding("f6", "choose_sort", "Sort by", show=False, priority=True),
        Binding("slash", "filter", "Filter", priority=True),
        Binding("backslash", "clear_filter", "Clear filter", show=False),
        Binding("c", "choose_columns", "Columns", priority=True),
        Binding("r", "reverse_sort", "Reverse", show=False, priority=True),  # no room at 80 columns (? lists it)
        # From the table (shown there), then the same keys on the views (hidden: the view shows its own);
        # on a view they come before its own keys: a number selects that view (it never goes back one, as
        # a view's own "back" key did) and Esc always leads to the table.
        Binding("2,t", "view('topdown')", "Top-down", priority=True),
        Binding("3", "view('heatmap')", "Heatmap", show=False, priority=True),
        Binding("4", "view('processes')", "Processes", show=False, priority=True),
        Binding("5", "view('cgroups')", "Cgroups", show=False, priority=True),
        Binding("6", "view('memory')", "Memory", show=False, priority=True),
        Binding("m", "choose_metric", "Heatmap metric", show=False, priority=True),
        Binding("escape", "back", "Table", priority=True),  # a process's detail: back to where it was opened
        Binding("1", "select_view('table')", show=False, priority=True),
        Binding("2,t", "select_view('topdown')", show=False, priority=True),
        Binding("3", "select_view('heatmap')", show=False, priority=True),
        Binding("4", "select_view('processes')", show=False, priority=True),
        Binding("5", "select_view('cgroups')", show=False, priority=True),
        Binding("6", "select_view('memory')", show=False, priority=True),
        Binding("m", "choose_metric('here')", "Metric", priority=True),  # the heatmap's own cycled through all
        Binding("home", "first_row", "First", show=False, priority=True),
        Binding("end", "last_row", "Last", show=False, priority=True),
    ]
    # Actions of the table screen only (other views have their own keys for these letters, or none).
    TABLE_ONLY = frozenset(
        {"next_sort", "previous_sort", "choose_sort", "reverse_sort", "filter", "clear_filter", "choose_columns"}
        | {"pause", "resume", "slower", "faster", "view"}
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
        task_feed: TaskFeed | None = None,
        task_note: str | None = None,
        start_view: str | None = None,
        package_feed: PackageFeed | None = None,
        dram_note: str | None = None,
        own_cost: OwnCostMeter | None = None,
        interrupt: Callable[[], bool] | None = None,
        start_tasks: TaskStarter | None = None,
    ) -> None:
        """`settings_path` None: settings are not saved (tests, screenshots); `settings_problem`: the one
        line to show about an unusable config file. `task_feed`: the per-process and per-cgroup counters
        (views 4 and 5; None: they say why not, `task_note` when the caller knows); `start_view`: the view
        to open on (--tasks, --cgroups) instead of the saved one. `package_feed`: DRAM bandwidth per package
        (the header's lines, the package rows, view 6; None: an estimate from LLC misses, `dram_note` why).
        `own_cost`: pmutop's own CPU % and RSS for the status line (None: not shown, as in the screenshots).
        `interrupt`: passes Ctrl-C on to the measured command (-- COMMAND), True when it did; Ctrl-C then does
        what it does in a shell instead of ending pmutop (which waits for the command to end). `start_tasks`:
        starts the per-process or per-cgroup counters when view 4 or 5 opens in a run not counting them yet."""
        super().__init__(driver_class=quick_exit_driver())
        self.feed = feed
        self.info = info
        self.tasks = tasks or NoTasks()
        self.task_feed = task_feed
        self.task_note = task_note
        self.start_view = start_view
        self.package_feed = package_feed
        self.dram_note = dram_note
        self.own_cost = own_cost
        self.interrupt = interrupt
        self.start_tasks = start_tasks
        self.settings = settings or Settings()
        self.settings_path = settings_path
        self.settings_problem = settings_problem
        keys: list[str] = []
        for cpu in feed.cpus:  # hybrid CPUs may count different sets
            keys += [k for k in feed.keys(cpu) if k not in keys]
        self.keys = keys
        rate_keys = tuple(extra_events(keys))
        # A remote feed (pmutop --connect) names its rows "host:cpu"; its CPU ids keep each host's rows together.
        self.names: dict[int, str] = feed.labels if isinstance(feed, HostLabels) else {}
        self.model = ViewModel(feed.cpus, info.core_types, rate_keys, self.names)
        self.model.step = feed.interval
        self.plot_specs = plot_specs(keys, rate_keys)
        self.lost_hosts = feed if isinstance(feed, LostHosts) else None  # remote hosts that may stop answering
        self.paused = False
        self.core_table = CoreTable(
            self.model,
            keys,
            self.names,
            self.settings,
            lambda: self.query_one("#cores", FastTable),
            self._fit,
            dram=package_feed is not None,
        )
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
        self._header_stale = False  # a view covered the table when the header was due: draw it on return

    # -- building

    def compose(self) -> ComposeResult:
        yield KeptStatic(machine_text(self.info), id="machine")
        yield KeptStatic(id="status")
        yield KeptStatic(id="banner")
        yield KeptStatic(id="dram")
        yield FastTable(id="cores", cursor_type="row", zebra_stripes=True)
        yield HistoryPanels(self.plot_specs, id="history")
        bar = FilterBar(
            placeholder="filter: 0-3,8  P  util>50  ipc<1 (Enter: apply, Esc: close, \\: clear)", id="filter"
        )
        bar.display = False
        yield bar
        yield KeptFooter()

    def get_default_screen(self) -> Screen[object]:
        return KeptScreen(id="_default")

    async def on_mount(self) -> None:
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
        self.screen_change_signal.subscribe(self, self._screen_changed)
        if self.settings_problem:
            self.notify(self.settings_problem, title="settings", severity="warning", timeout=10)
        await self.open_start_view()
        check_size(self, self.size.width, self.size.height)

    async def on_event(self, event: events.Event) -> None:
        # A key or click: pmutop's background Python threads pause until its answer is on screen
        # (pmutop.core.user_turn: the simulator's round at 256 CPUs would otherwise halve the UI's speed). A key
        # comes here twice, from the driver and bubbled back from the focused widget: the turn ends after the
        # refresh that follows the second, when the key's action has run.
        if isinstance(event, events.Key | events.MouseDown | events.MouseScrollDown | events.MouseScrollUp):
            USER_TURN.begin()
            self.call_after_refresh(USER_TURN.end)
        await super().on_event(event)

    def on_unmount(self) -> None:
        self._stop_watching()
        USER_TURN.end()  # the key that closed the view (q) has no refresh after it to end its turn

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
        """An error in the view ends the app with one line (printed by the CLI), not a traceback. (Textual
        calls this private hook; ending the app without the traceback is in textual_private.)"""
        if os.environ.get("PMUTOP_DEBUG"):
            super()._handle_exception(error)
            return
        self.failure = (
            f"internal error in the live view: {error} (a bug in pmutop: please report it with the output of "
            "PMUTOP_DEBUG=1)"
        )
        self._stop_watching()
        end_after_error(self, error)

    def _build_table(self, width: int, force: bool = False) -> None:
        """(Re)create the columns for this width; rows keep their keys. On start, resize, column choice."""
        if self.core_table.build(width, force):
            self._refresh_header()

    def on_resize(self, event) -> None:  # type: ignore[no-untyped-def]
        check_size(self, event.size.width, event.size.height)
        self._build_table(event.size.width)
        self.draw_dram()  # one line per socket, or one for all: by the new height
        self._fit()

    def _fit(self) -> None:
        """The table as tall as its rows when the history panels then still get room; else all table."""
        table = self.query_one("#cores", DataTable)
        panels = self.query_one("#history", HistoryPanels)
        chrome = 3 + (0 if self.query_one("#banner").has_class("empty") else 1)
        chrome += (1 if self.query_one("#filter").display else 0) + self.dram_rows
        avail = self.size.height - chrome
        rows = len(self.core_table.shown_rows) + 1  # + the header
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
        side: list[object] = [self.package_feed, self.task_feed]  # read just after the samples
        side_seen = interval_readings.seqs(side)
        while not self._stop.is_set():
            if not self.feed.wait_for_samples(seen, timeout=0.5, stop=self._stop):
                continue
            seen = {cpu: ring.count for cpu, ring in self.feed.rings.items()}
            if side[1] is not self.task_feed:  # keys 4 or 5 started the per-task counters
                side = [self.package_feed, self.task_feed]
                side_seen = interval_readings.seqs(side)
            if not self.paused:
                side_seen = interval_readings.wait_for_interval(side, side_seen, self.feed.interval)
            USER_TURN.wait()  # a key being answered goes first (the lookup can take ms at 256 CPUs)
            # Nothing to show them on while paused, or while a view without the top-task column covers the table
            # (a scan of every process each interval): the column is blank until the next interval after it.
            tasks = None if self.paused else {} if self._top_tasks_hidden() else self._lookup_tasks()
            if self._stop.is_set():
                return
            self.call_from_thread(self.apply_update, tasks)

    def _lookup_tasks(self) -> dict[int, TopTask]:
        try:
            return self.tasks.top_per_cpu()
        except Exception:  # a vanished process or permissions: the column just stays empty
            return {}

    def _refresh_stale_rows(self, *_: object) -> None:
        visible = self.core_table.take_visible_stale()
        if visible:
            with self.batch_update():
                self.core_table.update_rows(visible)

    def apply_update(self, tasks: dict[int, TopTask] | None, deferred: bool = False) -> None:
        if self._stop.is_set():  # closing: the widgets may already be gone
            return
        # A key's answer first (at 256 CPUs an update takes tens of ms); once only: a key held down (auto-repeat)
        # must not hold the numbers back.
        if USER_TURN.active and not deferred:
            self.call_after_refresh(self.apply_update, tasks, True)
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
        self.model.step = self.feed.interval  # after + or -: the sparklines' cells are of the new interval
        if changed and self.core_table.add_power_columns():
            self._build_table(self.size.width, force=True)
        if self._pending_tasks is not None:
            self.model.set_tasks(self._pending_tasks)
        if isinstance(self.screen, ViewScreen):
            if self.screen.is_mounted:  # one still mounting draws the model itself once it is
                self.screen.refresh_from(self.model)  # the table is hidden: its rows wait
            self.core_table.hidden_update()
        else:
            with self.batch_update():
                self.core_table.show_update(changed)
                self._refresh_panels()
        self._announce()
        self._refresh_header()
        self.poll_dram()
        self.updates += 1
        if changed and not self._numbers_shown:  # the first numbers are on screen: start-up is over
            self._numbers_shown = True
            self.check_pending_metric()
            self.call_after_refresh(freeze_startup_heap)

    def _refresh_panels(self) -> None:
        panels = self.query_one("#history", HistoryPanels)
        if not panels.display:
            return
        row_key = self._follow or TOTAL_ROW
        if row_key not in self.core_table.shown_rows:
            row_key = TOTAL_ROW
        core = self.core_table.core_for(row_key)
        who = "all CPUs" if row_key == TOTAL_ROW else core.label if core.cpu < 0 else f"cpu {core.label}"
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

    def _screen_changed(self, screen: object) -> None:
        if screen is not self.screen_stack[0]:
            return
        if self._header_stale:
            self._refresh_header()
        self._refresh_panels()
        if self.core_table.stale:
            self.call_after_refresh(self._refresh_stale_rows)

    def _announce(self) -> None:
        for message in dict.fromkeys(self.model.new_errors):  # a lost host: one message, not one per CPU
            self.notify(message, title="core failed", severity="error", timeout=10)
        for message in self.model.new_suspects[:3]:
            self.notify(message, title="suspect sample", severity="warning", timeout=6)
        self.model.new_errors.clear()
        self.model.new_suspects.clear()

    # -- sorting, rows, the formulas

    def _set_sort(self, key: str, reverse: bool) -> None:
        self.core_table.set_sort(key, reverse)
        self._refresh_header()
        self._remember(sort=key, reverse=reverse)

    @on(DataTable.HeaderSelected)
    def _header_clicked(self, event: DataTable.HeaderSelected) -> None:
        key = event.column_key.value or ""
        table = self.core_table
        if table.sortable(key):
            self._set_sort(key, not table.reverse if key == table.sort_key else key != "cpu")

    @on(DataTable.RowSelected)
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        key = event.row_key.value
        if key and key.startswith(PACKAGE_ROW):
            self.push_screen(DetailScreen(-1, package=int(key[len(PACKAGE_ROW) :])))
        elif key:
            self.push_screen(DetailScreen(-1 if key == TOTAL_ROW else int(key)))

    def shown_formulas(self) -> list[tuple[str, str]]:
        """The formulas behind the columns this run fills (the detail view shows them)."""
        return self.core_table.shown_formulas()

    # -- actions

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        top = self.screen
        if isinstance(top, TooSmallScreen):
            return action == "quit"
        on_table = top is self.screen_stack[0]
        if action in self.TABLE_ONLY and not on_table:
            return False
        if action in ("select_view", "back"):  # the views' keys; on the table its own (shown) bindings apply
            return isinstance(top, ViewScreen)
        if action == "choose_metric":  # the table's "m", or the heatmap's
            return isinstance(top, HeatmapScreen) if parameters else on_table
        if action == "help":
            return on_table or isinstance(top, ViewScreen)
        if action in ("first_row", "last_row"):
            return self._row_table() is not None
        if action == "pause":
            return not self.paused
        if action == "resume":
            return self.paused
        return True

    def _row_table(self) -> DataTable | None:
        """The table Home and End move in: the per-core table, or a view's (top-down); None while the filter
        line has the keys (Home/End move its cursor)."""
        if self.screen is self.screen_stack[0]:
            return None if self.query_one("#filter").has_focus else self.query_one("#cores", DataTable)
        focused = self.screen.focused
        return focused if isinstance(self.screen, ViewScreen) and isinstance(focused, DataTable) else None

    def action_toggle_pause(self) -> None:
        self.paused = not self.paused
        self.refresh_bindings()
        if not self.paused:
            self.apply_update(None)
        self._refresh_header()

    def action_pause(self) -> None:  # and Resume: two bindings, the footer names the one that applies
        self.action_toggle_pause()  # (the replay's adds to it)

    action_resume = action_pause

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
        key = self.core_table.sort_step(step)
        self._set_sort(key, key != "cpu")  # metrics sort highest first, CPUs in order

    def action_next_sort(self) -> None:
        self._step_sort(+1)

    def action_previous_sort(self) -> None:
        self._step_sort(-1)

    async def action_choose_sort(self) -> None:
        table = self.core_table
        choices = [(k, table.by_key[k].title) for k in table.visible_sortable()]

        def chosen(key: str | None) -> None:
            if key:
                self._set_sort(key, key != "cpu")

        await self.push_screen(ChoiceScreen("Sort by", choices, table.sort_key), chosen)

    def action_reverse_sort(self) -> None:
        self._set_sort(self.core_table.sort_key, not self.core_table.reverse)

    async def action_choose_columns(self) -> None:
        table = self.core_table
        columns = [(c.key, c.title) for c in table.columns]
        shown = {c.key for c in table.columns if table.wanted(c.key)}

        def chosen(keys: list[str] | None) -> None:
            if keys is None:
                return
            table.choose_columns(keys)
            self._build_table(self.size.width, force=True)
            self._remember(**table.column_settings())

        await self.push_screen(ColumnsScreen(columns, shown, {"cpu"}, set(table.widths)), chosen)

    def action_filter(self) -> None:
        bar = self.query_one("#filter", FilterBar)
        bar.display = True
        row_filter = self.core_table.row_filter
        bar.value = row_filter.text if row_filter else ""
        self.set_focus(bar)  # now, not later: the keys typed right after "/" belong to the filter
        self._fit()

    @on(Input.Submitted, "#filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        try:
            types = {c.core_type for c in self.model.cores.values() if c.core_type}
            self.core_table.row_filter = parse_filter(event.value, types)
        except PmutopError as e:
            self.notify(str(e), title="filter", severity="error", timeout=6)
            return
        bar = self.query_one("#filter", FilterBar)
        bar.display = False
        self.query_one("#cores", DataTable).focus()
        self._apply_filter()

    def action_clear_filter(self) -> None:
        self.core_table.row_filter = None
        bar = self.query_one("#filter", FilterBar)
        bar.value = ""
        bar.display = False
        self.query_one("#cores", DataTable).focus()
        self._apply_filter()

    def _apply_filter(self) -> None:
        with self.batch_update():
            self.core_table.apply_filter()
        self._fit()
        self._refresh_header()
        self._refresh_panels()

    def action_first_row(self) -> None:
        table = self._row_table()
        if table is not None:
            table.move_cursor(row=0)

    def action_last_row(self) -> None:
        table = self._row_table()
        if table is not None:
            table.move_cursor(row=table.row_count - 1)

    async def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            await self.push_screen(HelpScreen())

    async def action_quit(self) -> None:
        self._stop_watching()
        self.exit(0)

    async def action_ctrl_c(self) -> None:
        """The terminal is the view's (raw mode: no SIGINT): a measured command gets the Ctrl-C as from a shell."""
        if self.interrupt is not None and self.interrupt():
            self.notify("Ctrl-C passed on to the command (SIGINT); q ends pmutop", timeout=4)
            return
        await self.action_quit()
