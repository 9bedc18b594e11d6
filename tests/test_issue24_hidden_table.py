"""While a view (top-down, heatmap, processes...) covers the per-core table, the table's screen is not drawn:
its status line, DRAM line and rows wait, and are up to date the moment the table is back (Textual repaints
the whole screen under a view each time a hidden widget changes: a full screen redraw every interval)."""

from __future__ import annotations

from textual.widgets import Static

from pmutop.app.screenshots import demo_app
from pmutop.probes.tasks import TaskSource, TopTask
from pmutop.tui.screens.topdown import TopdownScreen
from tests.helpers.pilot import text_of
from tests.test_tui import WIDE, cell, tick


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


class _CountedTasks:
    def __init__(self, source: TaskSource) -> None:
        self.source, self.asked = source, 0

    def top_per_cpu(self) -> dict[int, TopTask]:
        self.asked += 1
        return self.source.top_per_cpu()


async def test_no_process_scan_for_the_top_task_column_while_a_view_without_it_covers_the_table() -> None:
    app, engine, _, clock = demo_app(intervals=3)
    tasks = app.tasks = _CountedTasks(app.tasks)
    async with app.run_test(size=WIDE) as pilot:
        await tick(app, pilot, engine, clock)
        assert tasks.asked and cell(app, "0", "task").strip()
        await pilot.press("2")
        await pilot.pause()
        asked = tasks.asked
        for _ in range(3):
            await tick(app, pilot, engine, clock)
        assert tasks.asked == asked
        await pilot.press("escape")
        await pilot.pause()
        assert not cell(app, "0", "task").strip()  # blank, not the top task of before the view
        await tick(app, pilot, engine, clock)
        assert tasks.asked == asked + 1 and cell(app, "0", "task").strip()
        await pilot.press("enter")  # a core's detail view shows its top task: it is looked up there
        await pilot.pause()
        await tick(app, pilot, engine, clock)
        assert tasks.asked == asked + 2
