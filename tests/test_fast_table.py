"""The live view's tables draw their rows themselves and redraw only the rows that changed: what they show
must be exactly what Textual's DataTable shows (text, colours, cursor, hover and zebra styles, the mouse's
row/column meta, horizontal scrolling), and a change must redraw only its own row."""

from __future__ import annotations

import pytest
from rich.segment import Segment
from rich.text import Text
from textual.app import App, ComposeResult
from textual.geometry import Region
from textual.pilot import Pilot
from textual.strip import Strip
from textual.widgets import Static
from textual.widgets.data_table import CellDoesNotExist

from pmutop.app.screenshots import scene
from pmutop.tui.screens.task_list import TaskListScreen
from pmutop.tui.widgets.fast_table import FastTable
from tests.helpers.fake_tasks import task_app


def _runs(strip: Strip) -> list[tuple[str, object]]:
    """Character runs with their styles (meta included), whatever the segment boundaries (an empty segment
    shows nothing)."""
    return [(s.text, s.style) for s in Segment.simplify(s for s in strip if s.text)]


def _as_datatable_draws(table: FastTable) -> tuple[list[Strip], list[Strip]]:
    """The table's lines as FastTable draws them, and as Textual's DataTable draws them."""
    region = Region(0, 0, table.size.width, table.size.height)
    table.notify_style_update()
    ours = table.render_lines(region)
    table._fast = False  # DataTable's drawing, through Textual's StylesCache
    try:
        table.notify_style_update()
        table._styles_cache.clear()
        theirs = table.render_lines(region)
    finally:
        table._fast = True
        table.notify_style_update()
    return ours, theirs


def _assert_same(table: FastTable) -> None:
    drawn_before = table.rows_drawn
    ours, theirs = _as_datatable_draws(table)
    assert table.rows_drawn > drawn_before  # FastTable did draw rows (not DataTable for all of them)
    assert len(ours) == len(theirs)
    for y, (mine, reference) in enumerate(zip(ours, theirs, strict=True)):
        assert _runs(mine) == _runs(reference), y


class _Table(App[None]):
    def __init__(self, rows: int = 12, **options: object) -> None:
        super().__init__()
        self.rows, self.options = rows, options

    def compose(self) -> ComposeResult:
        yield FastTable(id="t", cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        table = self.query_one(FastTable)
        for name, value in self.options.items():
            setattr(table, name, value)
        table.add_column("CPU", key="cpu", width=6)
        table.add_column("IPC", key="ipc", width=6)
        table.add_column("Task", key="task", width=14)
        table.add_column("Note", key="note", width=8)
        for row in range(self.rows):
            task = Text("pmutop ", style="bold")
            task.append("-d 1", style="dim")
            table.add_row(
                Text(str(row)),
                Text(f"{row / 3:.2f}", justify="right", style="red" if row % 3 else ""),
                task if row % 2 else Text(f"worker-{row}", justify="center"),
                None if row % 4 == 1 else Text("ok", style="green on black"),
                key=str(row),
            )
        table.focus()


def _screen_text(app: App[None]) -> str:
    return "\n".join("".join(s.text for s in strip) for strip in app.screen._compositor.render_strips())


async def _table(pilot: Pilot[None]) -> FastTable:
    await pilot.pause()
    return pilot.app.query_one(FastTable)


async def test_rows_draw_as_datatable_draws_them_cursor_hover_and_zebra() -> None:
    app = _Table()
    async with app.run_test(size=(50, 10)) as pilot:
        table = await _table(pilot)
        table.move_cursor(row=2)
        table.hover_coordinate = table.cursor_coordinate.down()
        table._show_hover_cursor = True
        await pilot.pause()
        _assert_same(table)
        table.scroll_y = 3  # rows below the first screen
        await pilot.pause()
        _assert_same(table)


async def test_rows_draw_as_datatable_draws_them_at_every_cursor_type_padding_and_blurred() -> None:
    for options in (
        {"cursor_type": "cell"},
        {"cursor_type": "column"},
        {"cursor_type": "none"},
        {"zebra_stripes": False, "cell_padding": 0},
        {"cell_padding": 2, "show_header": False},
    ):
        app = _Table(**options)
        async with app.run_test(size=(60, 10)) as pilot:
            table = await _table(pilot)
            table.move_cursor(row=1, column=2)
            await pilot.pause()
            _assert_same(table)
            table.blur()  # the cursor's colours without focus
            await pilot.pause()
            _assert_same(table)


async def test_a_table_wider_than_the_screen_scrolls_as_datatable_draws_it() -> None:
    app = _Table()
    async with app.run_test(size=(21, 10)) as pilot:
        table = await _table(pilot)
        for scroll_x in (0, 4, 9, table.max_scroll_x):
            table.scroll_to(x=scroll_x, animate=False)
            await pilot.pause()
            assert table.scroll_offset.x == scroll_x
            _assert_same(table)


async def test_the_live_views_rows_are_drawn_by_fast_table_as_datatable_draws_them() -> None:
    for name in ("main", "processes", "cgroups", "256-cores"):
        app, engine, keys = scene(name)
        try:
            async with app.run_test(size=(160, 50)) as pilot:
                await pilot.press(*keys)
                await pilot.pause()
                table = app.screen.query_one(FastTable)
                drawn = table.rows_drawn
                table.notify_style_update()
                await pilot.pause()
                visible = min(table.row_count - round(table.scroll_y), table.size.height - table.header_height)
                assert visible > 0
                assert table.rows_drawn - drawn == visible, name  # every row on screen, none by DataTable
                _assert_same(table)
        finally:
            if engine is not None:
                engine.stop()


async def test_a_changed_cell_shows_its_new_value_and_only_its_row_is_drawn_again() -> None:
    app = _Table()
    async with app.run_test(size=(50, 14)) as pilot:
        table = await _table(pilot)
        assert "1.00" in _screen_text(app)
        drawn = table.rows_drawn
        table.set_cells([("3", "ipc", Text("3.25", justify="right", style="red"))])
        await pilot.pause()
        text = _screen_text(app)
        assert "3.25" in text and "1.00" not in text and "0.67" in text
        assert table.get_cell("3", "ipc") == Text("3.25", justify="right", style="red")
        assert table.get_row_at(3)[1] == Text("3.25", justify="right", style="red")  # DataTable's API sees it
        assert table.rows_drawn - drawn == 1  # row 3 alone: the others' lines were kept
        drawn = table.rows_drawn
        table.set_cells([("5", "cpu", Text("five")), ("8", "note", Text("late")), ("5", "task", Text("x"))])
        await pilot.pause()
        assert table.rows_drawn - drawn == 2
        assert "five" in _screen_text(app) and "late" in _screen_text(app)
        _assert_same(table)


async def test_only_the_rows_on_screen_are_drawn() -> None:
    app = _Table(rows=256)
    async with app.run_test(size=(50, 12)) as pilot:
        table = await _table(pilot)
        on_screen = table.size.height - table.header_height
        drawn = table.rows_drawn
        table.notify_style_update()  # everything drawn again: the rows on screen, not the 256
        await pilot.pause()
        assert table.rows_drawn - drawn == on_screen
        drawn = table.rows_drawn
        table.set_cells([(str(row), "cpu", Text(f"c{row}")) for row in range(256)])
        await pilot.pause()
        assert table.rows_drawn - drawn == on_screen
        await pilot.press("ctrl+end")  # the cursor to the last row: the rows there are drawn when shown
        await pilot.pause()
        assert "c255" in _screen_text(app) and "c0 " not in _screen_text(app)
        _assert_same(table)


async def test_an_unknown_cell_is_datatables_error() -> None:
    app = _Table()
    async with app.run_test(size=(50, 10)) as pilot:
        table = await _table(pilot)
        for row, column in (("99", "cpu"), ("1", "nope")):
            with pytest.raises(CellDoesNotExist, match=f"{row}.*{column}"):
                table.set_cells([(row, column, Text("x"))])


async def test_reorder_moves_the_rows_as_sort_does_and_keeps_the_header_drawn() -> None:
    app = _Table(rows=6)
    async with app.run_test(size=(50, 10)) as pilot:
        table = await _table(pilot)
        header = table._header
        order = ["5", "3", "1", "0", "2", "4"]
        assert table.reorder(order)
        await pilot.pause()
        assert [str(row.key.value) for row in table.ordered_rows] == order
        lines = _screen_text(app).splitlines()
        assert [line.split()[0] for line in lines[1:7]] == order
        assert table._header is header  # the header line was not drawn again
        _assert_same(table)
        assert not table.reorder(["5", "3"]) and not table.reorder([*order[:-1], "9"])  # not its rows
        assert [str(row.key.value) for row in table.ordered_rows] == order


async def _process_view_on_third_row(pilot: Pilot[int]) -> tuple[TaskListScreen, FastTable]:
    await pilot.press("4", "down", "down")
    await pilot.pause()
    screen = pilot.app.screen
    assert isinstance(screen, TaskListScreen)
    return screen, screen.query_one("#tl-table", FastTable)


async def test_the_process_view_moves_reordered_rows_and_the_highlight_stays_on_its_process() -> None:
    app, engine, _, _, _ = task_app()
    try:
        async with app.run_test(size=(160, 50)) as pilot:
            screen, table = await _process_view_on_third_row(pilot)
            highlighted, updates = screen._cursor_key(), table._update_count
            rows = screen.rows(screen.tasks.task_feed.latest())  # type: ignore[union-attr,arg-type]
            assert len(rows) > 3 and highlighted == rows[2][0]
            screen._sync(table, rows[::-1])  # the same processes in another order
            await pilot.pause()
            assert [str(row.key.value) for row in table.ordered_rows] == [key for key, _, _ in rows[::-1]]
            assert screen._cursor_key() == highlighted and table.cursor_row == len(rows) - 3
            assert table._update_count == updates + 1  # moved (as DataTable.sort), not cleared and added again
            _assert_same(table)
    finally:
        engine.stop()


async def test_a_process_entering_and_one_leaving_change_only_their_rows_and_the_highlight_stays() -> None:
    app, engine, _, _, _ = task_app()
    try:
        async with app.run_test(size=(160, 50)) as pilot:
            screen, table = await _process_view_on_third_row(pilot)
            rows = screen.rows(screen.tasks.task_feed.latest())  # type: ignore[union-attr,arg-type]
            highlighted = screen._cursor_key()
            assert len(rows) > 4 and highlighted == rows[2][0]
            await pilot.pause()
            drawn = table.rows_drawn
            # The last process leaves, the first one moves to the end, and one enters (as the second).
            newcomer = rows[0][0] + "-new"
            changed = [rows[1], (newcomer, rows[0][1], rows[0][2]), *rows[2:-1], rows[0]]
            screen._sync(table, changed)
            await pilot.pause()
            assert [str(row.key.value) for row in table.ordered_rows] == [key for key, _, _ in changed]
            assert screen._cursor_key() == highlighted
            shown = {
                str(row.key.value): [Text.assemble(c).plain for c in table.get_row(row.key)]
                for row in table.ordered_rows
            }
            assert shown[newcomer] == shown[rows[0][0]]  # the newcomer's cells were drawn from its reading
            # Only the rows whose line changed were drawn again (moved lines and the new one).
            assert table.rows_drawn - drawn <= len(changed)
            _assert_same(table)
    finally:
        engine.stop()


class _FilledTable(_Table):
    """The table fills the screen below a title (as the process view's does: height 1fr)."""

    CSS = "FastTable { height: 1fr; }"

    def compose(self) -> ComposeResult:
        yield Static("title", id="title")
        yield from super().compose()


async def test_rows_coming_and_going_behind_a_scrollbar_lay_out_nothing_and_the_scrollbar_follows() -> None:
    """A process enters or leaves the table most intervals: while the table's box stays the same, that is the
    table's own scroll range, not a new layout of the whole screen (a full repaint each time); the scrollbar
    still appears, follows and goes."""
    app = _FilledTable(rows=30)
    async with app.run_test(size=(50, 12)) as pilot:
        table = await _table(pilot)
        assert table.show_vertical_scrollbar
        layouts = 0
        screen_layout = app.screen._refresh_layout

        def counted(*args: object, **kw: object) -> None:
            nonlocal layouts
            layouts += 1
            screen_layout(*args, **kw)

        app.screen._refresh_layout = counted  # type: ignore[method-assign]
        size = table.size
        for row in range(30, 36):  # six processes enter, one an interval
            table.add_row(Text(str(row)), None, None, None, key=str(row))
            await pilot.pause()
        table.remove_row("0")
        await pilot.pause()
        assert layouts == 0
        assert table.size == size and table.virtual_size.height == 35 + table.header_height
        assert table.vertical_scrollbar.window_virtual_size == table.virtual_size.height
        await pilot.press("ctrl+end")
        await pilot.pause()
        assert "35" in _screen_text(app).splitlines()[-1]  # the scroll range reaches the newest row
        for row in range(1, 30):  # few rows left: the scrollbar goes, and the screen is laid out for that
            table.remove_row(str(row))
        await pilot.pause()
        assert not table.show_vertical_scrollbar and layouts >= 1
        assert _screen_text(app).splitlines()[2].startswith(" 30")
