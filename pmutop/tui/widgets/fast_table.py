"""A DataTable that redraws only the cells whose text changed, and draws a one-line text cell directly.

DataTable.update_cell invalidates every rendered cell of the table (its caches are keyed on one update
counter), so each interval re-rendered every visible cell and the header through Rich's console, about
0.1 ms a cell: most of the live view's CPU. `set_cells` replaces values and drops only the cached renders
of those cells (and the rows and lines holding them). Both rely on DataTable's private caches (textual 8);
if they are not there, the table falls back to the public `update_cell`. Besides pmutop.tui.textual_private,
this is the one module that touches Textual's private API: it overrides DataTable._render_cell and reads
the caches on every cell drawn, so the override and its cache keys stay together here.
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.geometry import Region
from textual.strip import Strip
from textual.widgets import DataTable
from textual.widgets.data_table import Column, ColumnKey, RowKey

_PRIVATE = ("_data", "_cell_render_cache", "_row_render_cache", "_line_cache", "_update_count")
_MAX_CELL_STYLES = 8192


class _DrawnStyles:
    """A component's styles with its Rich style worked out once per draw (DataTable asks for the header and
    row styles on every line, and each ask walks the CSS again); anything else is the real object's."""

    __slots__ = ("_styles", "rich_style")

    def __init__(self, styles: object) -> None:
        self._styles = styles
        self.rich_style = styles.rich_style  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self._styles, name)


class FastTable(DataTable[object]):
    _style_in_render: Style | None = None
    _components_in_render: dict[str, _DrawnStyles] | None = None
    _settings_in_render: tuple[int, bool, bool, bool, bool, bool] | None = None
    _columns_in_render: list[Column] | None = None

    def __init__(self, *args: object, **kw: object) -> None:
        super().__init__(*args, **kw)  # type: ignore[arg-type]
        # A cell's style before its text (row/column meta for the mouse, row and cursor colours): the same
        # objects every interval, so Rich's style arithmetic hits its caches.
        self._cell_styles: dict[tuple[int, int, Style, Style], Style] = {}

    @property
    def ordered_columns(self) -> list[Column]:
        # Built anew (a list and a lookup per column) several times per line drawn; fixed during a draw.
        columns = self._columns_in_render
        return columns if columns is not None else super().ordered_columns

    def get_component_styles(self, *names: str):  # type: ignore[no-untyped-def]
        drawn = self._components_in_render
        if drawn is None or len(names) != 1:
            return super().get_component_styles(*names)
        styles = drawn.get(names[0])
        if styles is None:
            styles = drawn[names[0]] = _DrawnStyles(super().get_component_styles(*names))
        return styles

    @property
    def rich_style(self) -> Style:
        # DataTable asks for it on every line it draws, and it walks every ancestor's styles each time;
        # it cannot change while the table draws.
        style = self._style_in_render
        return style if style is not None else super().rich_style

    def render_lines(self, crop: Region) -> list[Strip]:
        self._style_in_render = None
        self._style_in_render = self.rich_style
        self._components_in_render = {}
        self._settings_in_render = self._cell_settings()
        self._columns_in_render = None
        self._columns_in_render = self.ordered_columns
        try:
            return super().render_lines(crop)
        finally:
            self._style_in_render = None
            self._components_in_render = None
            self._settings_in_render = None
            self._columns_in_render = None

    def _cell_settings(self) -> tuple[int, bool, bool, bool, bool, bool]:
        """The reactive settings every cell render reads (each read of a reactive costs a few µs)."""
        return (
            self.cell_padding,
            bool(self.fixed_rows or self.fixed_columns),
            self.show_cursor,
            self._show_hover_cursor,
            self.cursor_foreground_priority == "css",
            self.cursor_background_priority == "css",
        )

    def set_cells(self, changes: Iterable[tuple[str, str, Text]]) -> None:
        """Show new values for (row key, column key) cells; the widths stay as they are."""
        if not all(hasattr(self, name) for name in _PRIVATE):
            for row_key, column_key, value in changes:
                self.update_cell(row_key, column_key, value)
            return
        rows: set[RowKey] = set()
        cells: set[tuple[RowKey, ColumnKey]] = set()
        data = self._data
        for row_key, column_key, value in changes:
            rk, ck = RowKey(row_key), ColumnKey(column_key)
            data[rk][ck] = value
            rows.add(rk)
            cells.add((rk, ck))
        if not cells:
            return
        cell_cache = self._cell_render_cache
        for key in [k for k in cell_cache.keys() if (k[0], k[1]) in cells]:  # noqa: SIM118 (an LRUCache)
            cell_cache.discard(key)
        row_cache = self._row_render_cache
        for row_cache_key in [k for k in row_cache.keys() if k[0] in rows]:  # noqa: SIM118 (an LRUCache)
            row_cache.discard(row_cache_key)
        self._line_cache.clear()  # keyed by screen line: cheap to rebuild from the row renders
        self.refresh()

    def _render_cell(
        self,
        row_index: int,
        column_index: int,
        base_style: Style,
        width: int,
        cursor: bool = False,
        hover: bool = False,
    ) -> list[list[Segment]]:
        """Body cells holding one line of text that fits: segments built here, with the styles DataTable
        would give them; everything else (the header, wrapping, odd values) goes through DataTable."""
        pad, fixed, show_cursor, show_hover_cursor, fg_css, bg_css = self._settings_in_render or self._cell_settings()
        if row_index < 0 or column_index < 0 or fixed:
            return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        row_key = self._row_locations.get_key(row_index)
        column_key = self._column_locations.get_key(column_index)
        if row_key is None or column_key is None:  # not a cell of this table (DataTable draws nothing there)
            return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        cache_key = (
            row_key,
            column_key,
            base_style,
            cursor,
            hover,
            show_hover_cursor,
            self._update_count,
            self._pseudo_class_state,
        )
        cached = self._cell_render_cache.get(cache_key)
        if cached is not None:
            return cached
        row = self.rows.get(row_key)
        value = self._data.get(row_key, {}).get(column_key)
        inner = width - 2 * pad
        if (
            row is None
            or row.height != 1
            or not isinstance(value, Text)
            or "\n" in value.plain
            or cell_len(value.plain) > inner
        ):
            return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        component_style, post_style = self._get_styles_to_render_cell(
            False,
            False,
            False,
            hover,
            cursor,
            show_cursor,
            show_hover_cursor,
            fg_css,
            bg_css,
        )
        styles = self._cell_styles
        style_key = (row_index, column_index, base_style, component_style)
        pre = styles.get(style_key)
        if pre is None:
            if len(styles) >= _MAX_CELL_STYLES:
                styles.clear()
            pre = styles[style_key] = (
                base_style + Style.from_meta({"row": row_index, "column": column_index}) + component_style
            )
        gap = inner - cell_len(value.plain)
        justify = value.justify or "left"
        left = gap if justify == "right" else gap // 2 if justify == "center" else 0
        console = self.app.console
        # Rich pads a justified text with its own base style, and the cell padding with none; the text's
        # base style lies under its spans.
        text_style = console.get_style(value.style) if value.style else None
        body = value.render(console, end="")
        if text_style is not None:
            body = (Segment(t, text_style + style if style else text_style) for t, style, _ in body)
        segments = [
            Segment(" " * pad),
            Segment(" " * left, text_style),
            *body,
            Segment(" " * (gap - left), text_style),
            Segment(" " * pad),
        ]
        line = list(Segment.apply_style([s for s in segments if s.text], pre, post_style))
        lines = [line]
        self._cell_render_cache[cache_key] = lines
        return lines
