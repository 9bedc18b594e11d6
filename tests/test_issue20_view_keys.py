"""Issue 20, item 10: number keys select a view (no stack of views), Esc always goes to the table, Home/End
work in top-down, and the saved view is the last one shown."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.screen import Screen
from textual.widgets import DataTable

from pmutop.app.screenshots import demo_app
from pmutop.tui.config import load
from pmutop.tui.screens.detail import DetailScreen
from pmutop.tui.screens.heatmap import HeatmapScreen
from pmutop.tui.screens.topdown import TopdownScreen
from tests.test_issue20_footer_size import footer_line

VIEW = {"table": Screen, "topdown": TopdownScreen, "heatmap": HeatmapScreen, "detail": DetailScreen}


def shown(app) -> str:  # type: ignore[no-untyped-def]
    """The view on screen, and that it is the only view over the table (no stack)."""
    stack = app.screen_stack
    assert len(stack) <= 2, [type(s).__name__ for s in stack]
    if len(stack) == 1:
        return "table"
    return next(name for name, kind in VIEW.items() if name != "table" and isinstance(app.screen, kind))


@pytest.mark.parametrize(
    ("keys", "view"),
    [
        (("2", "3", "escape"), "table"),
        (("3", "2", "escape"), "table"),
        (("2", "2"), "topdown"),
        (("t", "t"), "topdown"),
        (("3", "3"), "heatmap"),
        (("2", "3"), "heatmap"),
        (("3", "t"), "topdown"),
        (("3", "1"), "table"),
        (("2", "enter", "escape"), "table"),
        (("down", "enter", "3"), "heatmap"),
        (("down", "enter", "escape"), "table"),
        (("3", "2", "3", "2", "escape", "escape"), "table"),
    ],
)
async def test_number_keys_select_a_view_and_esc_goes_to_the_table(
    tmp_path: Path, keys: tuple[str, ...], view: str
) -> None:
    app, engine, _, _ = demo_app(intervals=3, cpus=4, e_cores=0)
    app.settings_path = tmp_path / "config.toml"
    async with app.run_test(size=(120, 40)) as pilot:
        for key in keys:
            await pilot.press(key)
            await pilot.pause()
        assert shown(app) == view
        await pilot.press("q")
        await pilot.pause()
    saved, _ = load(tmp_path / "config.toml")
    assert saved.view == ("table" if view == "detail" else view)  # the last view shown
    engine.stop()


@pytest.mark.parametrize("key", ["2", "3"])
async def test_every_view_says_esc_goes_to_the_table(key: str) -> None:
    app, engine, _, _ = demo_app(intervals=3, cpus=4, e_cores=0)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press(key)
        await pilot.pause()
        assert "esc Table" in footer_line(app)
    engine.stop()


async def test_home_and_end_move_the_highlight_in_top_down() -> None:
    app, engine, _, _ = demo_app(intervals=3, cpus=16, e_cores=0)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("2")
        await pilot.pause()
        table = app.screen.query_one("#tma", DataTable)
        await pilot.press("end")
        await pilot.pause()
        assert table.cursor_row == table.row_count - 1
        await pilot.press("home")
        await pilot.pause()
        assert table.cursor_row == 0
    engine.stop()


async def test_the_saved_heatmap_view_comes_back_and_esc_still_leads_to_the_table(tmp_path: Path) -> None:
    app, engine, _, _ = demo_app(intervals=3, cpus=4, e_cores=0)
    app.settings.view = "heatmap"
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert shown(app) == "heatmap"
        await pilot.press("escape")
        await pilot.pause()
        assert shown(app) == "table"
    engine.stop()
