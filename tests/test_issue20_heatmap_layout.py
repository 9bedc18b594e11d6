"""Issue 20, smaller items: the heatmap fills the screen's width, its time axis sits right under the map, and
package power is one row per package (not a row per core, all but one "no sample")."""

from __future__ import annotations

import pytest

from pmutop.app.screenshots import demo_app
from pmutop.tui.heatmap import MISSING_CHAR
from pmutop.tui.screens.heatmap import HeatmapScreen
from pmutop.tui.widgets.heatmap_rows import HeatmapRows


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (250, 70)])
async def test_the_map_fills_the_width_and_its_time_axis_follows_right_below(size: tuple[int, int]) -> None:
    app, engine, _, _ = demo_app(intervals=120, model="spr", cpus=12, e_cores=0)
    try:
        async with app.run_test(size=size) as pilot:
            await app.push_screen(HeatmapScreen())
            await pilot.pause()
            screen = app.screen
            assert isinstance(screen, HeatmapScreen)
            rows = screen.query_one(HeatmapRows)
            for line in rows.lines:
                assert len(line.plain) >= size[0] - 6  # at most a few columns of padding left over
                assert MISSING_CHAR not in line.plain  # 120 s measured: every column has its sample
            axis = screen.query_one("#hm-axis")
            assert axis.region.y == rows.region.y + len(rows.lines)  # no empty rows between map and axis
            assert str(axis.render()).rstrip().endswith("now")
    finally:
        engine.stop()


async def test_package_power_is_one_row_per_package() -> None:
    app, engine, _, _ = demo_app(intervals=20, model="spr", cpus=16, e_cores=0)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await app.push_screen(HeatmapScreen("pkg_watts"))
            await pilot.pause()
            screen = app.screen
            rows = screen.query_one(HeatmapRows).lines
            assert [row.plain[: screen.label_width].strip() for row in rows] == ["pkg 0", "all"]
            assert rows[0].plain.count(MISSING_CHAR) == screen.points - 20  # measured: 20 s coloured
            assert rows[0].spans[-1].style.bgcolor is not None  # type: ignore[union-attr]
            assert "per package" in str(screen.query_one("#hm-title").render())
    finally:
        engine.stop()
