"""The live view's table draws its cells itself and redraws only the cells that changed: what it shows must
be exactly what Textual's DataTable would show (text, colours, cursor and zebra styles)."""

from __future__ import annotations

from rich.segment import Segment
from rich.text import Text
from textual.app import App, ComposeResult
from textual.widgets import DataTable

from pmutop.app.screenshots import scene
from pmutop.tui.widgets.fast_table import FastTable


def _plain_styles(lines: list[list[Segment]]) -> list[tuple[str, object]]:
    """Character runs with their styles, whatever the segment boundaries."""
    return [(s.text, s.style) for s in Segment.simplify(lines[0])]


async def test_every_cell_renders_as_datatable_renders_it() -> None:
    app, engine, _ = scene("main")
    try:
        async with app.run_test(size=(160, 50)) as pilot:
            await pilot.pause()
            table = app.query_one("#cores", FastTable)
            table._pseudo_class_state = table.get_pseudo_class_state()
            compared = 0
            for row in range(table.row_count):
                for col, column in enumerate(table.ordered_columns):
                    width = column.get_render_width(table)
                    for cursor in (False, True):
                        table._cell_render_cache.clear()
                        ours = FastTable._render_cell(table, row, col, table.rich_style, width, cursor)
                        table._cell_render_cache.clear()
                        theirs = DataTable._render_cell(table, row, col, table.rich_style, width, cursor)
                        assert _plain_styles(ours) == _plain_styles(theirs), (row, column.key.value, cursor)
                        compared += 1
            assert compared > 50
    finally:
        if engine is not None:
            engine.stop()


class _TwoRows(App[None]):
    def compose(self) -> ComposeResult:
        yield FastTable(id="t")

    def on_mount(self) -> None:
        t = self.query_one(FastTable)
        t.add_column("CPU", key="cpu", width=6)
        t.add_column("IPC", key="ipc", width=6)
        t.add_row(Text("0"), Text("1.00", justify="right"), key="0")
        t.add_row(Text("1"), Text("2.00", justify="right", style="red"), key="1")


def _screen_text(app: App[None]) -> str:
    return "\n".join("".join(s.text for s in strip) for strip in app.screen._compositor.render_strips())


async def test_set_cells_shows_the_new_value_and_keeps_the_rest() -> None:
    app = _TwoRows()
    async with app.run_test(size=(40, 6)) as pilot:
        table = app.query_one(FastTable)
        table.focus()
        await pilot.pause()
        assert "2.00" in _screen_text(app)
        cache = table._cell_render_cache
        before = {k: id(cache.get(k)) for k in cache.keys()}  # noqa: SIM118 (an LRUCache)
        table.set_cells([("1", "ipc", Text("3.25", justify="right", style="red"))])
        await pilot.pause()
        text = _screen_text(app)
        assert "3.25" in text and "2.00" not in text and "1.00" in text
        assert table.get_cell("1", "ipc").plain == "3.25"
        # Only the changed cell was rendered again (DataTable.update_cell re-renders every cell and the header).
        rendered = {k for k in cache.keys() if before.get(k) != id(cache.get(k))}  # noqa: SIM118
        assert rendered and {(k[0].value, k[1].value) for k in rendered} == {("1", "ipc")}
