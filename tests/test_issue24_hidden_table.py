"""While a view (top-down, heatmap, processes...) covers the per-core table, the table's screen is not drawn:
its status line, DRAM line and rows wait, and are up to date the moment the table is back (Textual repaints
the whole screen under a view each time a hidden widget changes: a full screen redraw every interval)."""

from __future__ import annotations

from textual.widgets import Static

from pmutop.app.screenshots import demo_app
from pmutop.tui.screens.topdown import TopdownScreen
from tests.helpers.pilot import text_of
from tests.test_tui import WIDE, tick


async def test_the_hidden_tables_header_waits_and_is_current_when_the_table_is_back() -> None:
    app, engine, _, clock = demo_app(intervals=3)
    async with app.run_test(size=WIDE) as pilot:
        await tick(app, pilot, engine, clock)
        status = app.query_one("#status", Static)
        await pilot.press("2")
        await pilot.pause()
        assert isinstance(app.screen, TopdownScreen)
        shown = text_of(status)
        repaints = 0
        refresh = status.refresh

        def counted(*args: object, **kw: object) -> object:
            nonlocal repaints
            repaints += 1
            return refresh(*args, **kw)

        status.refresh = counted  # type: ignore[method-assign]
        for _ in range(3):
            await tick(app, pilot, engine, clock, 10.0)  # the run clock moves 30 s
        assert repaints == 0 and text_of(status) == shown
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is app.screen_stack[0]
        assert text_of(status) != shown
        assert "0:00:3" in text_of(status) or "00:3" in text_of(status)
