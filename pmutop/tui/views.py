"""The live view's view keys: which view shows over the per-core table (top-down, heatmap, processes,
cgroups), Esc back, and the heatmap's metric. A part of PmutopApp (its base class), kept apart so the app
module stays about composing and the table."""

from __future__ import annotations

from pathlib import Path

from textual.app import App
from textual.screen import Screen

from pmutop.core.dram_reading import PackageFeed
from pmutop.core.feed import HostLabels, ReplayControls, SampleFeed
from pmutop.core.task_reading import TaskFeed, TaskStarter
from pmutop.tui.config import Settings
from pmutop.tui.config import save as save_settings
from pmutop.tui.heatmap import DRAM_METRICS, Metric
from pmutop.tui.model import ViewModel
from pmutop.tui.screens.base import ViewScreen
from pmutop.tui.screens.cgroups import CgroupsScreen
from pmutop.tui.screens.detail import DetailScreen
from pmutop.tui.screens.heatmap import HeatmapScreen
from pmutop.tui.screens.memory import MemoryScreen
from pmutop.tui.screens.pickers import ChoiceScreen, first_measured, measured_metrics
from pmutop.tui.screens.processes import ProcessesScreen
from pmutop.tui.screens.too_small import TooSmallScreen
from pmutop.tui.screens.topdown import TopdownScreen

VIEWS: dict[str, type[Screen[None]]] = {
    "topdown": TopdownScreen,
    "processes": ProcessesScreen,
    "cgroups": CgroupsScreen,
    "memory": MemoryScreen,
}
REMEMBERED = ("table", "topdown", "heatmap")  # a run without per-task counters cannot start in those views
WHAT = {"processes": "per-process counters", "cgroups": "per-cgroup counters"}
HOW = {"processes": "start with --tasks or --pid", "cgroups": "start with --cgroups or --cgroup PATH"}


class ViewKeys(App[int]):
    feed: SampleFeed
    model: ViewModel
    settings: Settings
    settings_path: Path | None  # None: settings are not saved (tests, screenshots)
    keys: list[str]
    task_feed: TaskFeed | None
    task_note: str | None  # why this run has no per-task counters, when the caller knows better
    start_tasks: TaskStarter | None  # starts them when view 4 or 5 opens (None: this run cannot)
    package_feed: PackageFeed | None

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
        if isinstance(self.feed, HostLabels):  # remote hosts' exporters
            return f"{what}: not available over --connect (the exporters serve per-CPU counters)"
        return f"{what}: {HOW.get(kind, '')}"

    async def action_select_view(self, view: str, metric: str | None = None) -> None:
        """Show `view` ("table", "topdown", "heatmap", "processes", "cgroups", "memory") as the one view over the table,
        whatever is shown now (views never stack: Esc then always leads to the table); the first three are
        the view the next run starts in. Awaited, so the keys typed after the view's key reach the view."""
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
        if view in REMEMBERED:
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
        return first_measured(self.heatmap_metrics(), wanted, self.settings.heatmap_metric)

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
