"""The live view over a fleet (`pmutop --prometheus URL`): the same app, opening on the host table.

The host table is the per-core table's logic over the fleet feed's host rows (pmutop.tui.fleet_table); the
heatmap shows hosts x time (pmutop.tui.screens.fleet_heatmap). Enter on a host opens its per-core table: the
view pmutop shows locally, over that instance's per-CPU feed (asked for that host only, its history filled
from query_range), named after the instance in the header; Esc goes back to the hosts (their rows kept
updating meanwhile) and stops asking for that host's CPUs.

Opening swaps what the app's table shows (feed, model, table logic, header), not the screen: every key of
the per-core table, and every view, then works on the host's CPUs as on a local machine.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual import on, work
from textual.binding import BindingType
from textual.widgets import DataTable, Input, Static

from pmutop.core.dram_reading import PackageFeed
from pmutop.core.errors import PmutopError
from pmutop.core.feed import HostLabels, LostHosts, SampleFeed
from pmutop.core.run_description import RunInfo
from pmutop.derive.records import extra_events
from pmutop.feeds.fleet import FleetFeed, HostCpus
from pmutop.tui.app import PmutopApp
from pmutop.tui.fleet_table import HostTable, parse_host_filter
from pmutop.tui.header import machine_text
from pmutop.tui.model import ViewModel
from pmutop.tui.screens.fleet_heatmap import FleetHeatmapScreen
from pmutop.tui.screens.fleet_topdown import FleetTopdownScreen
from pmutop.tui.screens.too_small import TooSmallScreen
from pmutop.tui.table_controller import TOTAL_ROW, CoreTable
from pmutop.tui.widgets.fast_table import FastTable
from pmutop.tui.widgets.filter_bar import FilterBar


@dataclass
class Shown:
    """What the app's table shows: the fleet's hosts, or one host's CPUs."""

    feed: SampleFeed
    info: RunInfo
    names: dict[int, str]
    keys: list[str]
    model: ViewModel
    table: CoreTable


class FleetApp(PmutopApp):
    BINDINGS: ClassVar[list[BindingType]] = []

    def __init__(self, fleet: FleetFeed, info: RunInfo, **options: object) -> None:
        super().__init__(fleet, info, **options)  # type: ignore[arg-type]
        self.fleet = fleet
        self.core_table = HostTable(
            self.model,
            self.keys,
            self.names,
            self.settings,
            lambda: self.query_one("#cores", FastTable),
            self._fit,
            fleet.hosts,
            fleet.restarted,
        )
        self.hosts_shown = self._shown()
        self.opened: HostCpus | None = None  # the host whose per-core table is shown
        self.opening: str | None = None  # the instance being opened (its history on its way)

    def _shown(self) -> Shown:
        return Shown(self.feed, self.info, self.names, self.keys, self.model, self.core_table)

    def _show(self, shown: Shown) -> None:
        self.feed, self.info, self.names, self.keys = shown.feed, shown.info, shown.names, shown.keys
        self.model, self.core_table = shown.model, shown.table
        self.lost_hosts = shown.feed if isinstance(shown.feed, LostHosts) else None
        self._follow = self._plotted = self._last_highlight = None
        self.query_one("#machine", Static).update(machine_text(self.info))
        self.core_table.build(self.size.width, force=True)
        self.core_table.move_cursor_to(self.core_table.shown_rows[0] if self.core_table.shown_rows else None)
        self._fit()
        self.apply_update(None)

    # -- the sample watcher follows whichever feed is shown

    @work(thread=True, exclusive=True, group="samples")
    def _watch_samples(self) -> None:
        feed: SampleFeed | None = None
        seen: dict[int, int] = {}
        while not self._stop.is_set():
            if self.feed is not feed:
                feed = self.feed
                seen = {cpu: 0 for cpu in feed.cpus}
            if not feed.wait_for_samples(seen, timeout=0.5, stop=self._stop):
                continue
            seen = {cpu: ring.count for cpu, ring in feed.rings.items()}
            if self._stop.is_set():
                return
            if feed is self.feed:
                self.call_from_thread(self.apply_update, None)

    # -- opening a host, and back

    @on(DataTable.RowSelected)
    def _host_selected(self, event: DataTable.RowSelected) -> None:
        key = event.row_key.value
        if self.opened is not None or not key or key == TOTAL_ROW:
            return  # a host's CPUs (or the fleet's all row): the detail view, as locally
        event.prevent_default()
        self.open_host(int(key))

    def open_host(self, index: int) -> None:
        instance = self.fleet.hosts[index].instance
        if self.opening is not None:
            return
        self.opening = instance
        self.notify(f"opening {instance}: its CPUs and their history", timeout=3)
        self._refresh_header()
        self._open_in_thread(index)

    @work(thread=True, exclusive=True, group="open-host")
    def _open_in_thread(self, index: int) -> None:
        """Discovery and query_range of one host off the UI thread: the hosts keep updating meanwhile."""
        try:
            feed = self.fleet.open_host(index)
        except PmutopError as e:
            self.call_from_thread(self._open_failed, str(e))
            return
        feed.start()
        if self._stop.is_set():
            feed.stop()
            return
        self.call_from_thread(self._show_host, feed)

    def _open_failed(self, why: str) -> None:
        self.opening = None
        self.notify(why, title="host", severity="error", timeout=8)
        self._refresh_header()

    def _show_host(self, feed: HostCpus) -> None:
        self.opening = None
        if self.opened is not None or self.screen is not self.screen_stack[0]:
            threading.Thread(target=feed.stop, daemon=True).start()  # the user went elsewhere meanwhile
            return
        self.opened = feed
        self.hosts_shown = self._shown()
        info = feed.run_info()
        keys: list[str] = []
        for cpu in feed.cpus:
            keys += [k for k in feed.keys(cpu) if k not in keys]
        names = feed.labels if isinstance(feed, HostLabels) else {}
        model = ViewModel(feed.cpus, info.core_types, tuple(extra_events(keys)), names)
        model.step = feed.interval
        dram = feed.package_feed is not None
        table = CoreTable(
            model, keys, names, self.settings, lambda: self.query_one("#cores", FastTable), self._fit, dram=dram
        )
        self._show_dram(feed.package_feed)
        self._show(Shown(feed, info, names, keys, model, table))

    def _show_dram(self, feed: PackageFeed | None) -> None:
        """The header's DRAM lines and the memory views from `feed` (an opened host's exporter), or from
        nothing (the hosts: their DRAM column)."""
        self.package_feed = feed
        self._dram_seq, self._dram_packages, self._dram_drawn = -1, None, None

    def close_host(self) -> None:
        feed = self.opened
        if feed is None:
            return
        self.opened = None
        threading.Thread(target=feed.stop, daemon=True).start()  # its last query may take its timeout
        self._show_dram(None)
        self._show(self.hosts_shown)

    def on_unmount(self) -> None:
        super().on_unmount()
        if self.opened is not None:
            self.opened.stop()

    # -- keys: Esc leaves a host, the heatmap shows hosts, the filter knows host names

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "back" and self.opened is not None and self.screen is self.screen_stack[0]:
            return not self.query_one("#filter").has_focus
        return super().check_action(action, parameters)

    async def action_back(self) -> None:
        if self.opened is not None and self.screen is self.screen_stack[0]:
            self.close_host()
            return
        await super().action_back()

    async def action_select_view(self, view: str, metric: str | None = None, remember: bool = True) -> None:
        """Over the hosts, the heatmap and top-down views are the fleet's (hosts as rows); the rest as locally."""
        if view not in ("heatmap", "topdown") or self.opened is not None:
            await super().action_select_view(view, metric, remember)
            return
        if isinstance(self.screen, FleetHeatmapScreen) and view == "heatmap":
            if metric:
                self.screen.set_metric(self._heatmap_metric(metric))
        elif not (isinstance(self.screen, FleetTopdownScreen) and view == "topdown"):
            while len(self.screen_stack) > 1 and not isinstance(self.screen, TooSmallScreen):
                await self.pop_screen()
            if view == "heatmap":
                await self.push_screen(FleetHeatmapScreen(self._heatmap_metric(metric)))
            else:
                await self.push_screen(FleetTopdownScreen())
        if remember:
            self._remember(view=view)

    @on(Input.Submitted, "#filter")
    def _host_filter_submitted(self, event: Input.Submitted) -> None:
        if self.opened is not None:
            return  # a host's CPUs: the per-core table's filter
        event.prevent_default()
        try:
            self.core_table.row_filter = parse_host_filter(event.value, self.fleet.hosts)  # type: ignore[assignment]
        except PmutopError as e:
            self.notify(str(e), title="filter", severity="error", timeout=6)
            return
        self.query_one("#filter", FilterBar).display = False
        self.query_one("#cores", DataTable).focus()
        self._apply_filter()

    def action_filter(self) -> None:
        super().action_filter()
        if self.opened is None:
            self.query_one(
                "#filter", FilterBar
            ).placeholder = "filter: host~web  ipc<1  util>50  cpus>32  worst<0.5 (Enter: apply, Esc: close, \\: clear)"

    def _announce(self) -> None:
        if self.opened is None:  # a host row without numbers: lost, or the server failing
            for message in dict.fromkeys(self.model.new_errors):
                self.notify(message, title="host", severity="error", timeout=10)
            self.model.new_errors.clear()
        super()._announce()

    # -- the header says where one is

    def dram_texts(self) -> list[Text]:
        """No estimate from LLC misses over the host table when the hosts export DRAM bandwidth: its DRAM
        column shows what they measured."""
        if self.opened is None and any(h.dram_bytes_per_s is not None for h in self.fleet.hosts):
            return []
        return super().dram_texts()

    def _draw_header(self) -> None:
        super()._draw_header()
        banner = self.query_one("#banner", Static)
        shown = banner.content
        if self.opened is None and isinstance(shown, Text) and " failed" in shown.plain:
            # The badge counts rows without numbers: here they are hosts (same length: the styles stay put).
            plain = re.sub(r"\b(\d+) core(s?) failed", r"\1 host\2 failed", shown.plain)
            banner.update(Text(plain, spans=shown.spans), layout=False)

    def _status_line(self, status: Text) -> Text:
        t = Text()
        if self.opened is not None:
            t.append(f" {self.opened.instance} ", style="bold reverse")
            t.append(" its CPUs · Esc: hosts  ·  ")
        else:
            hosts = len(self.fleet.hosts)
            t.append(f" {hosts} host{'' if hosts == 1 else 's'} ", style="bold reverse")
            t.append(f" opening {self.opening}…  ·  " if self.opening else " Enter: a host's CPUs  ·  ")
        t.append_text(status)
        return t
