"""The process view (key 4): one row per counted process, top-like; Enter opens the process: its history
plots, its last interval's counts and its threads."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from rich.console import RenderableType
from rich.table import Table as RichTable
from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import DataTable, Static

from pmutop.core.task_reading import TaskReading, TaskSnapshot
from pmutop.tui import format as fmt
from pmutop.tui.model import ViewModel
from pmutop.tui.screens.base import ViewScreen
from pmutop.tui.screens.task_list import POLL_S, Row, TaskListScreen, TaskViews, mode_marks
from pmutop.tui.task_columns import (
    FORMULAS,
    METRICS,
    PROCESS_COLUMNS,
    Reading,
    TaskColumn,
    columns_for,
    estimated_mode,
    is_estimated,
    layout,
    render,
    title_of,
    values,
)
from pmutop.tui.widgets.kept_lines import KeptFooter
from pmutop.tui.widgets.plot import HistoryPlot

# The detail view's plots: (value key, title, scale floor, style, value format), the first four counted.
PLOTS: tuple[tuple[str, str, float, str, Callable[[float], str]], ...] = (
    ("cpu", "CPU%", 100.0, "green", lambda v: f"{v:.0f}%"),
    ("ipc", "IPC", 2.0, "cyan", lambda v: f"{v:.2f}"),
    ("llc", "LLC misses/s", 1e6, "magenta", lambda v: fmt.si(v, 5).strip()),
    ("ghz", "GHz", 4.0, "yellow", lambda v: f"{v:.2f}"),
    ("csw", "CSw/s", 100.0, "blue", lambda v: fmt.si(v, 5).strip()),
)
PLOT_WIDTH = 38  # a plot narrower than this shows too little history to read
THREAD_COLUMNS = (TaskColumn("pid", "TID", 7, 0, justify="left"), TaskColumn("name", "Thread", 16, 0, justify="left"))


class ProcessesScreen(TaskListScreen):
    KIND = "processes"
    TITLE_TEXT = "Processes"
    COLUMNS = PROCESS_COLUMNS

    def rows(self, snapshot: TaskSnapshot) -> list[Row]:
        return self.sort_rows([(str(r.pid), r, 0) for r in snapshot.tasks])

    def text_fields(self, r: Reading) -> tuple[dict[str, str], int | None]:
        assert isinstance(r, TaskReading)
        return {"name": r.comm, "user": r.user, "cgroup": r.cgroup}, r.pid

    def open_detail(self, key: str) -> None:
        r = self.readings.get(key)
        if isinstance(r, TaskReading):
            self.app.push_screen(ProcessDetailScreen(r.pid, r.start_time))


def plots_for(events: list[str]) -> list[tuple[str, str, float, str, Callable[[float], str]]]:
    counted = {c.key for c in columns_for(METRICS, events)}
    return [p for p in PLOTS if p[0] in counted][:4]


class ReadingDetailScreen(ViewScreen):
    """One process's or cgroup's history plots and last interval; Esc goes back to where it was opened."""

    back_pops = True  # Esc: back one view (the list, a core's detail), not to the per-core table
    BINDINGS: ClassVar[list[BindingType]] = []

    def __init__(self) -> None:
        super().__init__()
        self._seq = -1

    @property
    def tasks(self) -> TaskViews:
        return self.live  # type: ignore[return-value]

    def compose(self) -> ComposeResult:
        feed = self.tasks.task_feed
        yield Static(id="rd-title")
        with VerticalScroll():
            with Horizontal(id="rd-plots"):
                for key, title, floor, style, show in plots_for(feed.events if feed else []):
                    yield HistoryPlot(title, show, floor, style, id=f"rd-{key}")
            yield Static(id="rd-facts")
            yield from self.more()
        yield KeptFooter()

    def more(self) -> ComposeResult:
        yield from ()

    @on(DataTable.RowSelected)
    @on(DataTable.RowHighlighted)
    def _own_rows(self, event: DataTable.RowSelected | DataTable.RowHighlighted) -> None:
        event.stop()  # the threads' rows are not the per-core table's (the app's handlers)

    def on_mount(self) -> None:
        self.set_interval(POLL_S, self._poll)
        self._poll()

    def on_resize(self, event: events.Resize) -> None:
        for i, plot in enumerate(self.query(HistoryPlot)):  # as many as have room to be read
            plot.display = i < max(1, event.size.width // PLOT_WIDTH)

    def refresh_from(self, model: ViewModel) -> None:
        self._poll()

    def _poll(self) -> None:
        feed = self.tasks.task_feed
        if feed is not None and feed.seq != self._seq:
            self._seq = feed.seq
            self.redraw(feed.latest())

    def history(self) -> list[Reading]:
        raise NotImplementedError

    def heading(self, latest: Reading | None, current: bool) -> Text:
        raise NotImplementedError

    def redraw(self, snapshot: TaskSnapshot | None) -> None:
        feed = self.tasks.task_feed
        assert feed is not None
        history = self.history()
        latest = history[-1] if history else None
        current = (
            latest is not None
            and snapshot is not None
            and any(r is latest for r in (*snapshot.tasks, *snapshot.cgroups))
        )
        estimated = estimated_mode(snapshot)
        title = self.heading(latest, current)
        mode_marks(title, snapshot, self.live.info)
        self.query_one("#rd-title", Static).update(title)
        for key, _plot_title, _, _, _ in plots_for(feed.events):
            plot = self.query_one(f"#rd-{key}", HistoryPlot)
            column = next(c for c in METRICS if c.key == key)
            plot.set_title(title_of(column, estimated))
            plot.set_values([values(r)[key] for r in history], self.live.feed.interval)
        self.query_one("#rd-facts", Static).update(self._facts(latest, feed.events, estimated))
        self.more_redraw(latest, estimated)

    def more_redraw(self, latest: Reading | None, estimated: bool) -> None:
        pass

    @staticmethod
    def _facts(r: Reading | None, events: list[str], estimated: bool) -> RenderableType:
        grid = RichTable.grid(padding=(0, 2))
        grid.add_column(style="cyan", no_wrap=True)
        grid.add_column(justify="right", no_wrap=True)
        grid.add_column(style="dim")
        if r is None:
            grid.add_row("last interval", "nothing counted yet", "")
            return grid
        grid.add_row(Text("last interval", style="bold"), f"{r.interval:.3f} s", f"counted {100 * r.counted:.0f}%")
        if r.no_permission:
            grid.add_row("", Text("no permission", style="yellow"), "pmutop may not count it (perf_event_paranoid)")
        for k in events:
            if k not in r.counts:
                continue
            value = f"~{r.counts[k]:,}" if k in r.estimated else f"{r.counts[k]:,}"
            note = f"counted {100 * r.estimated[k]:.0f}% of the time, scaled" if k in r.estimated else ""
            if estimated and k not in ("task_clock", "context_switches"):
                note = "est.: its share of its cores' counts"
            grid.add_row(k, value, note)
        for column in columns_for(METRICS, events):
            if column.key in FORMULAS:
                mark = " est." if estimated and is_estimated(column) else ""
                grid.add_row(column.title + mark, "", FORMULAS[column.key])
        return grid


class ProcessDetailScreen(ReadingDetailScreen):
    def __init__(self, pid: int, start_time: float = 0.0) -> None:
        super().__init__()
        self.pid = pid
        self.start_time = start_time

    def more(self) -> ComposeResult:
        yield Static(Text("threads", style="bold"), id="rd-threads-title")
        yield DataTable(id="rd-threads", cursor_type="row", zebra_stripes=True)

    def history(self) -> list[Reading]:
        feed = self.tasks.task_feed
        return list(feed.task_history(self.pid, self.start_time)) if feed is not None else []

    def heading(self, latest: Reading | None, current: bool) -> Text:
        if not isinstance(latest, TaskReading):
            return Text(f"pid {self.pid}: not counted in the kept history", style="bold")
        title = Text(
            f"{latest.comm} (pid {latest.pid}, {latest.threads} thread{'' if latest.threads == 1 else 's'})",
            style="bold",
        )
        title.append(f"   user {latest.user}" + (f"   cgroup {latest.cgroup}" if latest.cgroup else ""))
        if latest.exited:
            title.append("   exited", style="dim")
        elif not current:
            title.append("   not in the latest interval (left the top N?)", style="yellow")
        return title

    def more_redraw(self, latest: Reading | None, estimated: bool) -> None:
        feed = self.tasks.task_feed
        table = self.query_one("#rd-threads", DataTable)
        threads = latest.thread_readings if isinstance(latest, TaskReading) else ()
        self.query_one("#rd-threads-title").display = table.display = bool(threads)
        if not threads or feed is None:
            return
        columns = (*THREAD_COLUMNS, *columns_for(METRICS, feed.events))
        widths = layout(self.size.width - 4, columns, estimated)
        table.clear(columns=True)
        for c in columns:
            if c.key in widths:
                table.add_column(Text(title_of(c, estimated), justify=c.justify), width=widths[c.key], key=c.key)  # type: ignore[arg-type]
        for t in sorted(threads, key=lambda t: -t.counts.get("task_clock", 0)):
            table.add_row(*(render(k, t, w) for k, w in widths.items()), key=str(t.pid))
