"""The history plot draws each point as a bar in eighths of a cell, with its value axis and time axis."""

from __future__ import annotations

import random

from pmutop.tui.format import SPARK
from pmutop.tui.widgets.plot import HistoryPlot


def plot_text(values: list[float | None], width: int, height: int, floor: float = 1.0) -> list[str]:
    plot = HistoryPlot("IPC", lambda v: f"{v:.2f}", floor, "green")
    plot.set_values(values)
    return ["".join(seg.text for seg in line) for line in plot.lines(width, height)]


def expected_body(values: list[float | None], top: float, cols: int, rows: int) -> list[str]:
    """Each cell on its own: the part of the point's bar (eighths of the plot's height) in that row."""
    tail = ([None] * cols + values)[-cols:]
    out = []
    for r in range(rows):
        below = (rows - 1 - r) * 8
        line = ""
        for v in tail:
            if v is None:
                line += " "
            else:
                h = round(min(max(v / top, 0.0), 1.0) * rows * 8)
                line += SPARK[min(max(h - below, 0), 8)]
        out.append(line)
    return out


def test_every_cell_is_the_part_of_its_points_bar_in_that_row() -> None:
    rng = random.Random(7)
    for _ in range(50):
        width, height = rng.randint(20, 90), rng.randint(4, 30)
        values = [None if rng.random() < 0.1 else rng.uniform(0, 4) for _ in range(rng.randint(0, 120))]
        lines = plot_text(values, width, height)
        gutter = len(lines[0]) - len(lines[0].split("┤", 1)[1])  # the value axis' width, "┤" included
        cols = width - gutter
        body = [line[gutter:] for line in lines[:-1]]
        top = float(lines[0][: gutter - 1])  # the value axis' top label is the plot's top
        assert body == expected_body(values, top, cols, height - 1)
        assert all(len(line) == width for line in lines)
        assert lines[-1].split()[-1] == "now"  # the time axis


def test_a_plot_too_small_for_axes_is_bars_only() -> None:
    # top 1.0 over two rows: 1.0 fills both, 0.5 the lower one, None and 0 nothing.
    assert plot_text([1.0, 0.5, None, 0.0], width=10, height=2) == ["      █   ", "      ██  "]
    assert plot_text([0.75], width=3, height=2) == ["  ▄", "  █"]
