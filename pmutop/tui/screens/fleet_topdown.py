"""Top-down over the fleet's hosts (key 2 on the host table): the top-down view with a Host column wide enough
for the instances' names (each host's bar is its CPUs' slots together)."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import DataTable

from pmutop.tui.screens.fleet_heatmap import LABEL_MAX
from pmutop.tui.screens.topdown import TopdownScreen
from pmutop.tui.topdown_view import FIXED_COLUMNS, SHORT


class FleetTopdownScreen(TopdownScreen):
    def _build(self, width: int) -> bool:
        names = [len(c.label) for c in self.live.model.cores.values()]
        host = min(LABEL_MAX, max((FIXED_COLUMNS["cpu"], *names)))  # no hosts found yet: none
        fixed = sum(FIXED_COLUMNS.values()) - FIXED_COLUMNS["cpu"] + host
        bar = max(8, width - fixed - 2 * (len(FIXED_COLUMNS) + 1) - 2)
        if bar == self._bar_width:
            return False
        self._bar_width = bar
        table = self.query_one("#tma", DataTable)
        table.clear(columns=True)
        self._shown = {}
        table.add_column("Host", width=host, key="cpu")
        table.add_column("Issue slots", width=bar, key="bar")
        for k, title in SHORT.items():
            table.add_column(Text(title, justify="right"), width=FIXED_COLUMNS[k], key=k)
        table.add_column("Bottleneck", width=FIXED_COLUMNS["dominant"], key="dominant")
        self._rows = []
        return True
