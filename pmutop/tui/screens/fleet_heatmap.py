"""The fleet heatmap (`pmutop --prometheus`, key 3 on the host table): hosts down, time across.

One row per host, its value the host table's (its CPUs' counts summed, then the ratio), not all the fleet's
cores folded by host: per-CPU series of every host are what the fleet view never asks for (64,000 series a
round at 1,000 hosts), and a host's own total is what the host table sorts and filters by. When the hosts do
not fit, consecutive hosts share a row (their mean), labelled by the first and how many more."""

from __future__ import annotations

import math

from rich.text import Text

from pmutop.tui.format import WAITING
from pmutop.tui.heatmap import CHROME_ROWS, Group, geometry
from pmutop.tui.model import ViewModel
from pmutop.tui.screens.heatmap import HeatmapScreen

LABEL_MAX = 24  # a host's name is cut to this in the heatmap's label column


def host_label(name: str) -> str:
    return name if len(name) <= LABEL_MAX else name[: LABEL_MAX - 1] + "…"


def fold_hosts(labels: list[tuple[int, str]], rows: int) -> list[Group]:
    """At most `rows` rows for the hosts (row id, name), in order: one each when they fit, else runs of equal
    size labelled "first +N"."""
    rows = max(rows, 1)
    if len(labels) <= rows:
        return [Group(host_label(name), (row,)) for row, name in labels]
    size = math.ceil(len(labels) / rows)
    groups = []
    for start in range(0, len(labels), size):
        run = labels[start : start + size]
        more = f" +{len(run) - 1}" if len(run) > 1 else ""
        groups.append(Group(host_label(run[0][1])[: LABEL_MAX - len(more)] + more, tuple(row for row, _ in run)))
    return groups


class FleetHeatmapScreen(HeatmapScreen):
    def _layout(self, model: ViewModel) -> None:
        width, height = self.size
        key = (width, height, len(model.cores), None)
        if key == self._layout_for:
            return
        self._layout_for = key
        labels = [(cpu, core.label) for cpu, core in model.cores.items()]
        self.groups = fold_hosts(labels, max(height - CHROME_ROWS - 1, 1))
        self.label_width = max((3, *(len(g.label) for g in self.groups)))  # no hosts found yet: none
        self.points, self.cell = geometry(width, self.label_width)

    def title_text(self, model: ViewModel) -> Text:
        t = Text(f"Fleet heatmap: {self.metric.title} per host", style="bold")
        if self.grouped:
            size = max(len(g.cpus) for g in self.groups)
            t = Text(f"Fleet heatmap: {self.metric.title}, rows are runs of ≤{size} hosts (mean)", style="bold")
        if model.waiting:
            t.append(f"   {WAITING}", style="dim")
        if self.live.info.simulated:
            t.append("   SIMULATED", style="bold black on yellow")
        note = model.interval_note()
        if note:
            t.append(f"   {note}", style="yellow")
        return t
