"""What the process view and the cgroup view share: a table of one snapshot's readings with the per-core
table's keys (sort s < > r, filter / and \\, columns c, Home/End, Enter for the detail), redrawn only when
the task feed has a new snapshot, and then only the cells whose text changed."""

from __future__ import annotations

import contextlib
from typing import ClassVar, Protocol

from rich.style import Style
from rich.text import Span, Text
from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Input, Static
from textual.widgets.data_table import RowDoesNotExist, RowKey

from pmutop.core.errors import PmutopError
from pmutop.core.run_description import RunInfo
from pmutop.core.task_reading import SIMULATED, TaskFeed, TaskSnapshot
from pmutop.tui.filter import TaskFilter, parse_task_filter
from pmutop.tui.format import WAITING
from pmutop.tui.header import replay_mark
from pmutop.tui.model import ViewModel
from pmutop.tui.screens.base import LiveView, ViewScreen
from pmutop.tui.screens.pickers import ChoiceScreen, ColumnsScreen
from pmutop.tui.task_columns import (
    EST,
    SORT_FIRST,
    Reading,
    TaskColumn,
    columns_for,
    estimated_mode,
    layout,
    render,
    sort_value,
    title_of,
    values,
)
from pmutop.tui.widgets.fast_table import FastTable
from pmutop.tui.widgets.kept_lines import KeptFooter

# Each interval's update shows the interval's snapshot (the app's sample watcher waits for it: refresh_from); a
# snapshot later than that wait shows within this.
POLL_S = 1.0
SCROLLBAR = 2
Row = tuple[str, Reading, int]  # (row key, reading, indent)
CellLook = tuple[str, "str | Style", list[Span]]  # a cell's text, style and spans: what decides a redraw


class TaskViews(LiveView, Protocol):
    """What these views read from the app besides the LiveView: the task feed, or why there is none."""

    task_feed: TaskFeed | None

    def task_unavailable(self, kind: str) -> str: ...


def mode_marks(title: Text, snapshot: TaskSnapshot | None, info: RunInfo) -> None:
    """REPLAY for recorded numbers, `est.` for estimated ones, SIMULATED for made-up ones, on a view's title."""
    replay_mark(title, info)
    if estimated_mode(snapshot):
        title.append("   est.", style="bold black on cyan")
    if info.simulated or (snapshot is not None and snapshot.mode == SIMULATED):
        title.append("   SIMULATED", style="bold black on yellow")


class TaskFilterBar(Input):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "close", "Close")]

    def action_close(self) -> None:
        self.display = False
        self.screen.query_one("#tl-table").focus()


class TaskListScreen(ViewScreen):
    KIND = "processes"  # what the app's task_unavailable() is asked about
    TITLE_TEXT = "Processes"
    COLUMNS: tuple[TaskColumn, ...] = ()
    FIXED = frozenset({"pid", "name"})  # columns `c` cannot turn off
    PLACEHOLDER = "filter: pid=1234  user=alice  comm~nginx  ipc<1  cpu>50 (Enter: apply, Esc: close, \\: clear)"
    # Shown when the latest interval has no rows: a run may count cgroups but not processes, or the reverse.
    EMPTY = "no processes in the latest interval (processes are counted with --tasks, --pid or -- COMMAND)"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("s,greater_than_sign", "next_sort", "Sort"),
        Binding("less_than_sign", "previous_sort", "Sort back", show=False),
        Binding("f6", "choose_sort", "Sort by", show=False),
        Binding("r", "reverse_sort", "Reverse"),
        Binding("slash", "filter", "Filter"),
        Binding("backslash", "clear_filter", "Clear filter", show=False),
        Binding("c", "choose_columns", "Columns"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.sort_key = SORT_FIRST
        self.reverse = True  # busiest first, as top
        self.hidden: set[str] = set()
        self.row_filter: TaskFilter | None = None
        self.widths: dict[str, int] = {}
        self.dropped = 0  # chosen columns that do not fit the width (the title's "+N columns")
        self.columns: tuple[TaskColumn, ...] = ()
        self._estimated = False
        self._seq = -1  # the snapshot shown
        self._layout: tuple[object, ...] = ()
        self._keys: list[str] = []  # row keys in the table, in order
        self._cells: dict[tuple[str, str], CellLook] = {}  # what each cell shows
        self.readings: dict[str, Reading] = {}

    @property
    def tasks(self) -> TaskViews:
        return self.live  # type: ignore[return-value]

    def compose(self) -> ComposeResult:
        yield Static(id="tl-title")
        yield Static(id="tl-notes")
        yield FastTable(id="tl-table", cursor_type="row", zebra_stripes=True)
        bar = TaskFilterBar(placeholder=self.PLACEHOLDER, id="tl-filter")
        bar.display = False
        yield bar
        yield KeptFooter()

    def on_mount(self) -> None:
        self.set_interval(POLL_S, self._poll)
        self._poll()

    def on_resize(self, event: events.Resize) -> None:
        self._redraw(force=True)

    def refresh_from(self, model: ViewModel) -> None:
        self._poll()

    def _poll(self) -> None:
        """Redraw when the feed has a new snapshot (an int compare otherwise: this runs 4 times a second)."""
        feed = self.tasks.task_feed
        if feed is None:
            if self._seq != -2:
                self._seq = -2
                self._unavailable()
            return
        if feed.seq != self._seq:
            self._redraw()

    def _unavailable(self) -> None:
        title = Text(self.TITLE_TEXT, style="bold")
        mode_marks(title, None, self.live.info)
        self.query_one("#tl-title", Static).update(title)
        self.query_one("#tl-notes", Static).update(Text(self.tasks.task_unavailable(self.KIND), style="yellow"))
        self.query_one("#tl-table").display = False

    # -- what the subclasses say

    def rows(self, snapshot: TaskSnapshot) -> list[Row]:
        """The snapshot's rows, in the order the sort asks for."""
        raise NotImplementedError

    def open_detail(self, key: str) -> None:
        raise NotImplementedError

    def text_fields(self, r: Reading) -> tuple[dict[str, str], int | None]:
        """What the filter's text terms look at, and the PID (None: no PID)."""
        raise NotImplementedError

    def sort_rows(self, rows: list[Row]) -> list[Row]:
        def key(row: Row) -> float | str:
            return sort_value(self.sort_key, row[1])

        missing = [r for r in rows if key(r) == float("-inf")]  # last whichever way
        return sorted((r for r in rows if key(r) != float("-inf")), key=key, reverse=self.reverse) + missing

    # -- drawing

    def _redraw(self, force: bool = False) -> None:
        feed = self.tasks.task_feed
        if feed is None:
            return
        self._seq = feed.seq
        snapshot = feed.latest()
        self._estimated = estimated_mode(snapshot)
        self.columns = columns_for(self.COLUMNS, feed.events)
        # Estimated numbers are no counter's: there is no counted share to show.
        shown = tuple(
            c for c in self.columns if c.key not in self.hidden and not (self._estimated and c.key == "counted")
        )
        width = self.size.width - SCROLLBAR
        table = self.query_one("#tl-table", FastTable)
        if force or self._layout != (shown, self._estimated, width, self.sort_key, self.reverse):
            self._layout = (shown, self._estimated, width, self.sort_key, self.reverse)
            self.widths = layout(width, shown, self._estimated)
            self.dropped = len(shown) - len(self.widths)
            cursor = self._cursor_key()
            table.clear(columns=True)
            for c in shown:
                if c.key in self.widths:
                    label = title_of(c, self._estimated)
                    if c.key == self.sort_key:
                        label += "▼" if self.reverse else "▲"
                    table.add_column(Text(label, justify=c.justify), width=self.widths[c.key], key=c.key)  # type: ignore[arg-type]
            self._keys, self._cells = [], {}
            self._move_to(cursor)
        rows = self.rows(snapshot) if snapshot is not None else []
        every = len(rows)
        if self.row_filter is not None:
            f = self.row_filter
            rows = [row for row in rows if f.matches(*self.text_fields(row[1]), values(row[1]))]
        self.readings = {key: r for key, r, _ in rows}
        self._sync(table, rows)
        self._title(snapshot, len(rows), every)
        notes = list(snapshot.notes) if snapshot is not None else [WAITING]
        if snapshot is not None and not every:
            notes.insert(0, self.EMPTY)
        failure = getattr(feed, "failure", None)
        if failure:
            notes.insert(0, failure)
        notes_widget = self.query_one("#tl-notes", Static)
        notes_widget.display = bool(notes)
        # One line high in the CSS whatever it says: no layout of the screen for it (each interval).
        notes_widget.update(Text(" · ".join(notes), style="cyan" if self._estimated else "dim"), layout=False)

    def _sync(self, table: FastTable, rows: list[Row]) -> None:
        """Rows in or out, the order, and only the cells that changed."""
        keys = [key for key, _, _ in rows]
        cells = {(key, k): render(k, r, w, indent) for key, r, indent in rows for k, w in self.widths.items()}
        looks = {at: (text.plain, text.style, text.spans) for at, text in cells.items()}
        cursor = self._cursor_key()
        # Processes that left go and new ones are added; only the cells whose look changed are set (FastTable
        # redraws only their rows); then the rows are moved into order (not cleared and added again: that
        # measures every cell and redraws the header).
        fresh: set[str] = set()
        if keys != self._keys:
            had = set(self._keys)
            for key in had.difference(keys):
                table.remove_row(key)
            fresh = {key for key in keys if key not in had}
            for key in keys:
                if key in fresh:
                    table.add_row(*(cells[(key, k)] for k in self.widths), key=key)
            if not table.reorder(keys):  # (not FastTable's private state: DataTable's own way)
                table.clear()
                fresh = set(keys)
                for key in keys:
                    table.add_row(*(cells[(key, k)] for k in self.widths), key=key)
        changed = [(*at, cells[at]) for at, look in looks.items() if at[0] not in fresh and self._cells.get(at) != look]
        if changed:
            table.set_cells(changed)
        if keys != self._keys:
            self._keys = keys
            self._move_to(cursor)
        self._cells = looks

    def _title(self, snapshot: TaskSnapshot | None, shown: int, every: int) -> None:
        title = Text(self.TITLE_TEXT, style="bold")
        title.append(f"   {every} counted" + (f", {shown} shown" if shown != every else ""))
        sort = next((c for c in self.columns if c.key == self.sort_key), None)
        if sort is not None:
            title.append(f"   sorted by {sort.title}{' ▼' if self.reverse else ' ▲'}", style="dim")
        if self.row_filter is not None:
            title.append(f"   filter: {self.row_filter.text}", style="yellow")
        if self.dropped:
            title.append(f"   +{self.dropped} column{'s' if self.dropped > 1 else ''} (c)", style="dim")
        mode_marks(title, snapshot, self.live.info)
        if self._estimated:
            title.append(f"  ({EST.strip()} columns: each core's counts split by CPU share)", style="cyan")
        self.query_one("#tl-title", Static).update(title, layout=False)  # one line high in the CSS

    def _cursor_key(self) -> str | None:
        table = self.query_one("#tl-table", DataTable)
        if not table.row_count or not 0 <= table.cursor_row < len(self._keys):
            return None
        return self._keys[table.cursor_row]

    def _move_to(self, key: str | None) -> None:
        table = self.query_one("#tl-table", DataTable)
        if key is None:
            return
        with contextlib.suppress(RowDoesNotExist):
            table.move_cursor(row=table.get_row_index(RowKey(key)), animate=False)

    @on(DataTable.RowHighlighted)
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()  # the app's handler follows the per-core table's rows only

    @on(DataTable.RowSelected, "#tl-table")
    def _selected(self, event: DataTable.RowSelected) -> None:
        event.stop()  # not the app's: it opens a core's detail
        if event.row_key.value:
            self.open_detail(event.row_key.value)

    # -- keys

    def _sortable(self) -> list[str]:
        return [c.key for c in self.columns if c.key in self.widths]

    def _set_sort(self, key: str, reverse: bool) -> None:
        self.sort_key, self.reverse = key, reverse
        self._redraw(force=True)

    def _step_sort(self, step: int) -> None:
        keys = self._sortable()
        if not keys:
            return
        i = keys.index(self.sort_key) if self.sort_key in keys else -1 if step > 0 else 0
        key = keys[(i + step) % len(keys)]
        self._set_sort(key, key not in ("pid", "user", "name", "cpus"))  # numbers highest first, text A-Z

    def action_next_sort(self) -> None:
        self._step_sort(+1)

    def action_previous_sort(self) -> None:
        self._step_sort(-1)

    def action_reverse_sort(self) -> None:
        self._set_sort(self.sort_key, not self.reverse)

    async def action_choose_sort(self) -> None:
        choices = [(c.key, c.title) for c in self.columns if c.key in self.widths]

        def chosen(key: str | None) -> None:
            if key:
                self._set_sort(key, key not in ("pid", "user", "name", "cpus"))

        await self.app.push_screen(ChoiceScreen("Sort by", choices, self.sort_key), chosen)

    async def action_choose_columns(self) -> None:
        columns = [(c.key, c.title) for c in self.columns]
        shown = {c.key for c in self.columns if c.key not in self.hidden}

        def chosen(keys: list[str] | None) -> None:
            if keys is not None:
                self.hidden = {c.key for c in self.columns if c.key not in keys and c.key not in self.FIXED}
                self._redraw(force=True)

        await self.app.push_screen(ColumnsScreen(columns, shown, set(self.FIXED), set(self.widths)), chosen)

    def action_filter(self) -> None:
        bar = self.query_one("#tl-filter", TaskFilterBar)
        bar.display = True
        bar.value = self.row_filter.text if self.row_filter else ""
        self.set_focus(bar)  # now: the keys typed right after "/" belong to the filter

    @on(Input.Submitted, "#tl-filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        numeric = {c.key for c in self.columns if c.key not in ("pid", "user", "name", "cpus")}
        try:
            self.row_filter = parse_task_filter(event.value, numeric | {"threads", "procs"})
        except PmutopError as e:
            self.app.notify(str(e), title="filter", severity="error", timeout=6)
            return
        self.query_one("#tl-filter").display = False
        self.query_one("#tl-table").focus()
        self._redraw(force=True)

    def action_clear_filter(self) -> None:
        self.row_filter = None
        bar = self.query_one("#tl-filter", TaskFilterBar)
        bar.value = ""
        bar.display = False
        self.query_one("#tl-table").focus()
        self._redraw(force=True)
