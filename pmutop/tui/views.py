"""The live view's view keys: which view shows over the per-core table (top-down, heatmap, processes,
cgroups), Esc back, and the heatmap's metric. A part of PmutopApp (its base class), kept apart so the app
module stays about composing and the table."""

from __future__ import annotations

from pathlib import Path

from textual.app import App
from textual.screen import Screen

from pmutop.core.dram_reading import PackageFeed
from pmutop.core.feed import HostLabels, ReplayControls, SampleFeed
from pmutop.core.run_description import RunInfo
from pmutop.core.task_reading import TaskFeed, TaskStarter
from pmutop.tui.config import Settings
from pmutop.tui.config import save as save_settings
from pmutop.tui.heatmap import BY_KEY, DRAM_KEYS, DRAM_METRICS, Metric, metric_of
from pmutop.tui.model import ViewModel
from pmutop.tui.screens.base import ViewScreen
from pmutop.tui.screens.cgroups import CgroupsScreen
from pmutop.tui.screens.detail import DetailScreen
from pmutop.tui.screens.heatmap import HeatmapScreen
from pmutop.tui.screens.memory import MemoryScreen
from pmutop.tui.screens.pickers import METRIC_NEEDS, ChoiceScreen, first_measured, measured_metrics
from pmutop.tui.screens.processes import ProcessesScreen
from pmutop.tui.screens.too_small import TooSmallScreen
from pmutop.tui.screens.topdown import TopdownScreen

VIEWS: dict[str, type[Screen[None]]] = {
    "topdown": TopdownScreen,
    "processes": ProcessesScreen,
    "cgroups": CgroupsScreen,
    "memory": MemoryScreen,
}
TASK_VIEWS = ("processes", "cgroups")  # shown only by a run that counts per task (else the table, and why)
WHAT = {"processes": "per-process counters", "cgroups": "per-cgroup counters"}
# Heatmap metrics only the samples can say are measured (power from its sources, top-down where the samples
# carry it): a saved one waits for the first readings; the others are known to be measured or not from the start.
SAMPLE_BORNE = frozenset(BY_KEY) - DRAM_KEYS - frozenset(METRIC_NEEDS)
HOW = {"processes": "start with --tasks or --pid", "cgroups": "start with --cgroups or --cgroup PATH"}


class ViewKeys(App[int]):
    feed: SampleFeed
    info: RunInfo
    model: ViewModel
    settings: Settings
    settings_path: Path | None  # None: settings are not saved (tests, screenshots)
    keys: list[str]
    task_feed: TaskFeed | None
    task_note: str | None  # why this run has no per-task counters, when the caller knows better
    start_tasks: TaskStarter | None  # starts them when view 4 or 5 opens (None: this run cannot)
    package_feed: PackageFeed | None
    start_view: str | None  # --tasks, --cgroups: the view to open on instead of the saved one
    _metric_pending: str | None = None  # the saved heatmap metric shown before the readings say if it is measured
    _said_metric: str | None = None  # the saved metric this run said it cannot show

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

    def table_covered(self) -> bool:
        """A view covers the table's screen: what is drawn on it waits (Textual repaints the whole screen
        under a view when a widget of the screen below changes), and is drawn when the table is back."""
        return isinstance(self.screen, ViewScreen)

    def _top_tasks_hidden(self) -> bool:
        """From the sample watcher's thread: `screen` raises once the app has closed its screens."""
        stack = self.screen_stack
        screen = stack[-1] if stack else None
        return isinstance(screen, ViewScreen) and not isinstance(screen, DetailScreen)

    def task_unavailable(self, kind: str) -> str:
        """One line: why the process (or cgroup) view has nothing to show, and how to get it."""
        what = WHAT.get(kind, kind)
        if self.task_note:
            return f"{what}: {self.task_note}"
        if isinstance(self.feed, ReplayControls):
            return f"{what}: this recording has none"
        if self.info.read_method.startswith("promql"):  # --prometheus: per-host and per-CPU series only
            return f"{what}: not available over --prometheus (pmutop asks it for hosts and CPUs)"
        if isinstance(self.feed, HostLabels):  # remote hosts' exporters
            return f"{what}: not available over --connect (the exporters serve per-CPU counters)"
        return f"{what}: {HOW.get(kind, '')}"

    async def open_start_view(self) -> None:
        """On start: the view asked for (--tasks, --cgroups), else the saved one. A saved view this run cannot
        show (a process or cgroup view where per-task counters cannot be started) leaves the table on screen and
        says why, once; the setting stays for the next run that can."""
        view = self.start_view or self.settings.view
        if view in TASK_VIEWS and self.task_feed is None and self.start_tasks is None and not self.start_view:
            title = "process" if view == "processes" else "cgroup"
            self.notify(
                f"{self.task_unavailable(view)}; showing the table instead of the saved {title} view",
                title="settings",
                severity="warning",
                timeout=10,
            )
        elif view != "table":
            await self.action_select_view(view, remember=False)

    async def action_select_view(self, view: str, metric: str | None = None, remember: bool = True) -> None:
        """Show `view` ("table", "topdown", "heatmap", "processes", "cgroups", "memory") as the one view over the table,
        whatever is shown now (views never stack: Esc then always leads to the table); it is the view the next
        run starts in. Awaited, so the keys typed after the view's key reach the view."""
        if view in WHAT and self.start_tasks is not None:
            self._start_counting(view)
        wanted: type[Screen[None]] | None = HeatmapScreen if view == "heatmap" else VIEWS.get(view)
        if wanted is None or not isinstance(self.screen, wanted):
            while len(self.screen_stack) > 1 and not isinstance(self.screen, TooSmallScreen):
                await self.pop_screen()
            if view == "heatmap":
                await self.push_screen(HeatmapScreen(self._heatmap_metric(metric)))
            elif view in VIEWS:
                await self.push_screen(VIEWS[view]())
        elif isinstance(self.screen, HeatmapScreen) and metric:
            self.screen.set_metric(self._heatmap_metric(metric))
        if remember:
            self._remember(view=view)

    def _start_counting(self, view: str) -> None:
        """The options only choose the view to open on: opening the process or cgroup view counts what it shows
        from now, as --tasks or --cgroups would have."""
        assert self.start_tasks is not None
        feed, lines = self.start_tasks(view)
        if feed is not None:
            self.task_feed = feed
        elif lines:
            self.task_note = lines[-1]
        for line in lines:
            self.notify(line, title=WHAT[view], severity="information" if feed is not None else "warning", timeout=8)

    async def action_back(self) -> None:
        """Esc: from a process's or cgroup's detail back to where it was opened; else to the table."""
        if getattr(self.screen, "back_pops", False):
            await self.pop_screen()
        else:
            await self.action_select_view("table")

    def _heatmap_metric(self, wanted: str | None) -> Metric:
        """`wanted` (a key, the chooser's), else the saved metric, where this run measures it; else the first
        it measures. The saved one is kept until the first readings when only they can say (power, top-down
        from the samples); one this run cannot show is replaced, once, with a line saying so."""
        measured = self.heatmap_metrics()
        if wanted is not None or self.settings.heatmap_metric is None:
            return first_measured(measured, wanted, self.settings.heatmap_metric)
        saved = self.settings.heatmap_metric
        if any(m.key == saved for m in measured):
            return first_measured(measured, saved)
        if self.model.waiting and saved in SAMPLE_BORNE:
            self._metric_pending = saved
            return metric_of(saved)
        return self._metric_fallback(saved, measured)

    def _metric_fallback(self, saved: str, measured: list[Metric]) -> Metric:
        fallback = measured[0]
        if self._said_metric != saved:  # once a run, however often the heatmap opens
            self._said_metric = saved
            try:
                title = metric_of(saved).title
            except KeyError:  # not a metric (an edited file, a newer pmutop's): its key
                title = saved
            self.notify(
                f"heatmap: the saved metric {title} is not measured here; showing {fallback.title}",
                title="settings",
                severity="warning",
                timeout=10,
            )
        return fallback

    def check_pending_metric(self) -> None:
        """After the first readings: the saved metric the heatmap showed while it waited, if they do not
        measure it, gives way to one they do."""
        pending, self._metric_pending = self._metric_pending, None
        screen = self.screen
        if pending is None or not isinstance(screen, HeatmapScreen) or screen.metric.key != pending:
            return
        measured = self.heatmap_metrics()
        if not any(m.key == pending for m in measured):
            screen.set_metric(self._metric_fallback(pending, measured))

    def heatmap_metrics(self) -> list[Metric]:
        """What the heatmap can show in this run: only what it measures (util at least; DRAM read and write
        per package with a DRAM bandwidth source)."""
        topdown = self.model.measures_topdown or any(self.feed.topdown_method(cpu) for cpu in self.feed.cpus)
        dram = list(DRAM_METRICS) if self.package_feed is not None else []
        return [*measured_metrics(self.model, self.keys, topdown), *dram]

    async def action_view(self, view: str) -> None:  # the table's view keys (the views' are select_view)
        await self.action_select_view(view)

    async def action_choose_metric(self, _where: str = "") -> None:
        current = self.screen.metric.key if isinstance(self.screen, HeatmapScreen) else self.settings.heatmap_metric

        async def chosen(key: str | None) -> None:
            if key:
                self.settings.heatmap_metric = key
                await self.action_select_view("heatmap", key)

        choices = [(m.key, m.title) for m in self.heatmap_metrics()]
        await self.push_screen(ChoiceScreen("Heatmap metric", choices, current), chosen)
