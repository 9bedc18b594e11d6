"""The detail view of one core (or of a package's CPUs, or of all CPUs together): history plots, the last
interval's raw deltas, overflow counts, the formulas behind the columns, top-down history; a package's memory
channels."""

from __future__ import annotations

from typing import ClassVar

from rich.console import RenderableType
from rich.table import Table as RichTable
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import DataTable, Static

from pmutop.core.sample import Sample
from pmutop.core.task_reading import TaskFeed
from pmutop.derive import topdown
from pmutop.tui import format as fmt
from pmutop.tui.model import CoreState, ViewModel, resample
from pmutop.tui.screens.base import VIEW_KEYS, ViewScreen
from pmutop.tui.screens.memory import package_block
from pmutop.tui.screens.processes import ProcessDetailScreen
from pmutop.tui.screens.task_list import POLL_S
from pmutop.tui.topdown_view import COLOURS
from pmutop.tui.widgets.history_panel import HistoryPanels
from pmutop.tui.widgets.kept_lines import KeptFooter

HISTORY_WIDTH = 40  # cells of the detail view's top-down history


def power_rows(samples: list[Sample]) -> list[tuple[str, str]]:
    """turbostat's view of one CPU's last interval, or of several (means, the hottest, counts): Busy %, Avg
    and Bzy MHz, each idle state's residency, temperature, package power, what throttles the clock. Only
    what was measured; empty when nothing was."""
    several = len(samples) > 1
    mean_note = " (mean)" if several else ""
    rows: list[tuple[str, str]] = []

    def mean(values: list[float]) -> float | None:
        return sum(values) / len(values) if values else None

    busy = mean([s.busy for s in samples if s.busy is not None])
    bzy = mean([s.bzy_mhz for s in samples if s.bzy_mhz is not None])
    # turbostat's Avg_MHz: the clock averaged over the whole interval, idle included (= Busy% × Bzy_MHz).
    avg = mean([s.busy * s.bzy_mhz / 100 for s in samples if s.busy is not None and s.bzy_mhz is not None])
    if busy is not None:
        rows.append(("Busy %", f"{busy:.1f}%{mean_note}"))
    if avg is not None:
        rows.append(("Avg MHz", f"{avg:.0f}{mean_note}"))
    if bzy is not None:
        rows.append(("Bzy MHz", f"{bzy:.0f}{mean_note}"))
    states = list(dict.fromkeys(k for s in samples for k in s.cstates))
    for state in states:  # a CPU without the state counts as 0 % in it
        residency = mean([s.cstates.get(state, 0.0) for s in samples if s.cstates])
        rows.append((state, f"{residency:.1f}%{mean_note}"))
    temps = [s.temp_c for s in samples if s.temp_c is not None]
    if temps:
        rows.append(("Temperature", f"{max(temps):.0f} °C" + (" (hottest)" if several else "")))
    pkg_temps = [s.pkg_temp_c for s in samples if s.pkg_temp_c is not None]
    if pkg_temps:
        rows.append(("Package °C", f"{max(pkg_temps):.0f} °C"))
    watts = [s.energy_j["package"] / s.interval for s in samples if "package" in s.energy_j and s.interval > 0]
    if watts:
        rows.append(("Package W", f"{sum(watts):.1f} W" + (f" ({len(watts)} packages)" if len(watts) > 1 else "")))
    watched = [s for s in samples if "throttle" in s.power_src]
    if watched:
        reasons = list(dict.fromkeys(r for s in watched for r in s.throttle))
        throttled = sum(1 for s in watched if s.throttle)
        text = ", ".join(reasons) if reasons else "nothing"
        if several and reasons:
            text += f" ({throttled} of {len(watched)} CPUs)"
        rows.append(("Throttled by", text))
    return rows


class DetailScreen(ViewScreen):
    """One core in depth: history plots, the last interval's raw deltas, overflow counts, formulas."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,enter", "app.pop_screen", "Back"),
        *VIEW_KEYS,
    ]

    def __init__(self, cpu: int, package: int | None = None) -> None:
        """`cpu` -1: all CPUs together; `package`: that package's CPUs together (its row), with its channels."""
        super().__init__()
        self.cpu = cpu
        self.package = package

    def _core(self, model: ViewModel) -> CoreState:
        if self.package is not None:
            return model.packages[self.package]
        return model.cores[self.cpu] if self.cpu >= 0 else model.total  # -1: all CPUs together

    def _members(self, core: CoreState, model: ViewModel) -> list[CoreState]:
        """The CPUs a row adds up: every one for the all row, a package's for its row, else the core."""
        if core is model.total:
            return list(model.cores.values())
        if self.package is not None:
            return [c for c in model.cores.values() if c.latest is not None and c.latest.package == self.package]
        return [core]

    def compose(self) -> ComposeResult:
        yield Static(id="detail-title")
        with VerticalScroll():
            if self.package is not None:  # first: what a package's row adds to a core's detail
                yield Static(id="channels")
            yield HistoryPanels(self.live.plot_specs, prefix="detail", id="plots")
            with Horizontal(id="facts"):
                yield Static(id="deltas")
                yield Static(id="formulas")
            yield Static(id="tma-detail")
            yield Static(id="power")
            if self._task_feed() is not None and self.cpu >= 0:
                yield Static(Text("processes on this CPU", style="bold"), id="cpu-procs-title")
                yield DataTable(id="cpu-procs", cursor_type="row", zebra_stripes=True)
        yield KeptFooter()

    def _task_feed(self) -> TaskFeed | None:
        return getattr(self.app, "task_feed", None)

    _processes_shown = False  # the table of the processes that ran on this CPU is there

    def on_mount(self) -> None:
        self._task_seq = -1
        self.refresh_from(self.live.model)
        self._draw_channels()
        if self._task_feed() is not None and self.cpu >= 0:
            table = self.query_one("#cpu-procs", DataTable)
            table.add_column("PID", width=8, key="pid")
            table.add_column("Command", width=20, key="comm")
            table.add_column(Text("Share of busy", justify="right"), width=13, key="share")
            # Each update shows the interval's task snapshot (refresh_from); one later than the app's wait for it
            # shows within a second.
            self.set_interval(POLL_S, self._processes)
            self._processes_shown = True
            self._processes()
            table.focus()  # Enter opens the highlighted process (Esc goes back)

    def _processes(self) -> None:
        """The processes that ran on this CPU in the latest interval, with their share of its busy time."""
        feed = self._task_feed()
        if feed is None or feed.seq == self._task_seq:
            return
        self._task_seq = feed.seq
        snapshot = feed.latest()
        table = self.query_one("#cpu-procs", DataTable)
        cursor = table.cursor_row
        table.clear()
        if snapshot is None:
            return
        names = {r.pid: r.comm for r in snapshot.tasks}
        for pid, share in snapshot.cpu_shares.get(self.cpu, ()):
            table.add_row(str(pid), names.get(pid, "?"), Text(f"{100 * share:.1f}%", justify="right"), key=str(pid))
        if 0 <= cursor < table.row_count:
            table.move_cursor(row=cursor, animate=False)

    @on(DataTable.RowHighlighted, "#cpu-procs")
    def _process_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()  # the app's handler follows the per-core table's rows only

    @on(DataTable.RowSelected, "#cpu-procs")
    def _process_chosen(self, event: DataTable.RowSelected) -> None:
        event.stop()  # not the app's: it opens a core's detail
        feed = self._task_feed()
        snapshot = feed.latest() if feed is not None else None
        pid = int(event.row_key.value or 0)
        start = next((r.start_time for r in snapshot.tasks if r.pid == pid), 0.0) if snapshot else 0.0
        self.app.push_screen(ProcessDetailScreen(pid, start))

    def refresh_from(self, model: ViewModel) -> None:
        app = self.live
        core = self._core(model)
        kind = {"P": "P-core", "E": "E-core"}.get(core.core_type or "", "")
        name = f"cpu {self.cpu}" if self.cpu >= 0 else f"all {len(model.cores)} CPUs"
        if self.package is not None:
            name = f"package {self.package} ({len(self._members(core, model))} CPUs)"
        title = Text(name + (f" ({kind})" if kind else ""), style="bold")
        if app.info.simulated:
            title.append("   SIMULATED", style="bold black on yellow")
        task, latest = core.task, core.latest
        if task is not None and latest is not None and core.error is None:
            # As top's %CPU: the process's CPU time over the interval (over 100% for several busy threads).
            share = f", {100 * task.cpu_seconds / latest.interval:.0f}% CPU" if latest.interval > 0 else ""
            title.append(f"   top task {task.name} (pid {task.pid}{share})", style="cyan")
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
        self.query_one("#power", Static).update(self._power(self._members(core, model)))
        self.query_one("#formulas", Static).update(self._formulas(app.shown_formulas()))
        self.query_one("#tma-detail", Static).update(self._topdown(core, model, app.feed.interval))
        if self._processes_shown:
            self._processes()

    def refresh_dram(self) -> None:
        if self.is_mounted:
            self._draw_channels()

    def _draw_channels(self) -> None:
        """A package's channels: bars per channel, as the memory view (6) shows them."""
        if self.package is None:
            return
        feed = self.live.package_feed
        dram = self.live.model.packages[self.package].dram
        if dram is None:
            why = "no memory-controller counters in this run" if feed is None else "waiting for the first figures"
            self.query_one("#channels", Static).update(Text(f"DRAM bandwidth: {why}", style="dim"))
            return
        self.query_one("#channels", Static).update(package_block(dram, self.size.width - 2))

    def _topdown(self, core: CoreState, model: ViewModel, step: float) -> RenderableType:
        """Level 1 history (one line each, 0..100%, a cell per `step` seconds, as the plots) and the latest
        level 2, where measured."""
        if core.cpu < 0:  # a sum (all, a package) has no method of its own: its cores' methods
            members = self._members(core, model)
            methods = [c.latest.topdown for c in members if c.latest is not None]
            method = "/".join(sorted({m for m in methods if m})) or None
            measured = sum(1 for m in methods if m)
            if method and measured < len(members):  # a hybrid part's E-cores, say: the sum is of fewer
                method += f", {measured} of {len(members)} CPUs"
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
    def _power(cores: list[CoreState]) -> RenderableType:
        """turbostat's columns (pmutop.probes.power), for the core or, on the all row (a package's), all its
        live CPUs."""
        samples = [c.latest for c in cores if c.latest is not None and c.error is None and not c.latest.suspect]
        rows = power_rows(samples)
        grid = RichTable.grid(padding=(0, 1))
        grid.add_column(style="cyan", no_wrap=True)
        grid.add_column(justify="right", no_wrap=True)
        if not rows:
            return grid
        grid.add_column(style="dim", no_wrap=True)
        sources = sorted({src for s in samples for src in s.power_src.values()})
        grid.add_row(Text("power and idle", style="bold"), "", ", ".join(sources))
        why = {"Avg MHz": "Busy% × Bzy MHz (turbostat Avg_MHz)", "Bzy MHz": "the clock while not idle"}
        for name, value in rows:
            grid.add_row(name, value, why.get(name, ""))
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
