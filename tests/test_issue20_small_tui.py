"""Issue 20, "Smaller, all to fix" (the live view's part): keys typed in one burst with the key that opens a
dialog, the column picker, the header, the help's config path, the panel titles, the filter, and the
turbostat columns `c` offers."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual import events
from textual.widgets import SelectionList

from pmutop.app.screenshots import demo_app
from pmutop.tui.screens.detail import DetailScreen
from pmutop.tui.screens.heatmap import HeatmapScreen
from pmutop.tui.screens.pickers import ChoiceScreen, ColumnsScreen
from tests.test_issue20_footer_size import screen_text

KEY_CHARS = {"space": " ", "slash": "/", "question_mark": "?"}


async def burst(app, pilot, *keys: str) -> None:  # type: ignore[no-untyped-def]
    """Keys as a fast typist (or a paste) sends them: all queued before the first is handled."""
    for key in keys:
        char = KEY_CHARS.get(key, key if len(key) == 1 else None)
        app._driver.send_message(events.Key(key, char))
    for _ in range(10):
        await pilot.pause(0.05)


async def test_keys_typed_in_one_burst_with_c_reach_the_column_picker() -> None:
    app, engine, _, _ = demo_app(intervals=3, cpus=4, e_cores=0)
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        await burst(app, pilot, "c", "down", "space", "enter")
        assert not isinstance(app.screen, ColumnsScreen)
        assert app.core_table.hidden == {"ghz"} and "ghz" not in app.core_table.widths
        assert not app.paused and not isinstance(app.screen, DetailScreen)
    engine.stop()


async def test_keys_typed_in_one_burst_with_a_view_key_reach_that_view() -> None:
    app, engine, _, _ = demo_app(intervals=3, cpus=4, e_cores=0)
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        await burst(app, pilot, "3", "m", "down", "enter")
        assert isinstance(app.screen, HeatmapScreen) and app.screen.metric.key == "util"
    engine.stop()


async def test_keys_typed_in_one_burst_with_slash_go_to_the_filter() -> None:
    app, engine, _, _ = demo_app(intervals=3, cpus=4, e_cores=0)
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        await burst(app, pilot, "slash", "0", "-", "1", "enter")
        assert app.core_table.shown_rows[:-1] == ["0", "1"]
    engine.stop()


async def test_keys_typed_in_one_burst_with_f6_reach_the_sort_chooser() -> None:
    app, engine, _, _ = demo_app(intervals=3, cpus=4, e_cores=0)
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        await burst(app, pilot, "f6", "down", "enter")
        assert not isinstance(app.screen, ChoiceScreen) and app.core_table.sort_key == "util"
    engine.stop()
