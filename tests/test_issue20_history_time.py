"""Issue 20, item 4 and the history panels' axes: plots are drawn against time, not sample count; the
interval changes are marked in the plots and the heatmap; neighbouring panels share their time labels."""

from __future__ import annotations

import re

from pmutop.app.screenshots import demo_app
from pmutop.tui.format import MARK
from pmutop.tui.screens.heatmap import HeatmapScreen
from pmutop.tui.widgets.heatmap_rows import HeatmapRows
from pmutop.tui.widgets.history_panel import HistoryPanels
from pmutop.tui.widgets.plot import HistoryPlot

BARS = set("▁▂▃▄▅▆▇█")


async def run_1s_02s_1s(app, pilot, engine, clock) -> None:  # type: ignore[no-untyped-def]
    """6 s at 1 s, 6 s at 0.2 s, 6 s at 1 s: 18 s and 42 samples."""
    await pilot.press("minus", "minus")
    assert engine.interval == 0.2
    for _ in range(30):
        clock.advance(0.2)
        engine.tick()
        app.apply_update(None)
    await pilot.press("plus", "plus")
    assert engine.interval == 1.0
    for _ in range(6):
        clock.advance(1.0)
        engine.tick()
        app.apply_update(None)
    await pilot.pause()


def plot_lines(plot: HistoryPlot) -> list[str]:
    return ["".join(seg.text for seg in plot.body.render_line(y)) for y in range(plot.content_size.height)]


def label_centres(axis: str) -> dict[str, int]:
    return {m.group(): (m.start() + m.end() - 1) // 2 for m in re.finditer(r"-[0-9.]+[smh][0-9s]*", axis)}


async def test_the_table_views_plots_are_drawn_against_time_and_mark_the_interval_changes() -> None:
    app, engine, _, clock = demo_app(intervals=6)
    try:
        async with app.run_test(size=(160, 50)) as pilot:
            await run_1s_02s_1s(app, pilot, engine, clock)
            plots = list(app.query_one("#history", HistoryPanels).query(HistoryPlot))
            axes = []
            for plot in plots:
                lines = plot_lines(plot)
                body, axis = lines[:-1], lines[-1]
                gutter = axis.index("└") + 1
                cols = len(axis) - gutter
                axis = axis[gutter:]
                drawn = [c for c in range(cols) if any(line[gutter + c] in BARS for line in body)]
                # 18 s at one column a second: the rightmost 18 columns, not 42 (one per sample).
                assert drawn == list(range(cols - 18, cols)), plot.border_title
                # The two changes, 12 s and 6 s before now: a mark under each, a dotted line above the bars.
                assert [x for x, ch in enumerate(axis) if ch == MARK] == [cols - 12, cols - 6]
                assert all(any(line[gutter + c] == "┊" for line in body) for c in (cols - 12, cols - 6))
                centres = label_centres(axis)
                for label, x in centres.items():  # each label sits on the column edge of its time
                    seconds = float(label[1:-1])
                    assert abs(x - (cols - seconds)) <= 1, (label, x, cols)
                assert axis.endswith("now")
                axes.append(sorted(centres, key=lambda k: float(k[1:-1])))
            assert len(plots) == 4 and all(a == axes[0] for a in axes)  # the same labels side by side
            assert len({p.content_size.width for p in plots}) <= 2  # widths differ at most by the odd column
    finally:
        engine.stop()


async def test_the_heatmap_is_drawn_against_time_and_marks_the_interval_changes() -> None:
    app, engine, _, clock = demo_app(intervals=6, cpus=8, e_cores=0, model="spr")
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await run_1s_02s_1s(app, pilot, engine, clock)
            await app.push_screen(HeatmapScreen())
            await pilot.pause()
            screen = app.screen
            assert isinstance(screen, HeatmapScreen)
            rows = screen.query_one(HeatmapRows).lines
            start = screen.label_width + 1
            first = rows[0].plain[start:]
            measured = [x for x, ch in enumerate(first) if ch != "·"]
            width = screen.points * screen.cell
            assert measured == list(range(width - 18 * screen.cell, width))  # 18 s, not 42 samples
            axis = str(screen.query_one("#hm-axis").render())[start:]
            assert "60 s ago" not in axis and axis.rstrip().endswith("now")
            marks = [x for x, ch in enumerate(axis) if ch == MARK]
            assert marks == [width - 12 * screen.cell + screen.cell // 2, width - 6 * screen.cell + screen.cell // 2]
            title = str(screen.query_one("#hm-title").render())
            assert "interval 1 s → 0.2 s 12 s ago; interval 0.2 s → 1 s 6 s ago" in title
    finally:
        engine.stop()
