"""A DataTable that draws a changed row as one strip of pre-styled segments, and redraws only changed rows.

DataTable draws each cell through Rich's console (Padding, Styled, Text layout: about 0.1 ms a cell), then
joins, crops, pads and simplifies the line; its update_cell invalidates every render and repaints the whole
table. For the live view's tables (one-line text cells that fit) that was most of the CPU. FastTable:
- `set_cells` replaces values, forgets only the changed rows' strips and repaints only their lines
  (Widget.refresh(Region)); `reorder` moves rows as DataTable.sort does; only rows on screen are drawn;
- `render_line` builds a body row directly (cell_segments: one segment per plain cell), with DataTable's
  styles (row/column meta for the mouse, zebra, cursor, hover) combined once and kept per row and column;
  a row's strip is kept until the row, the cursor/hover on it or the table's look changes;
- with a plain box (no border, padding, tint...) `render_lines` skips Textual's StylesCache, and applies the
  app's ANSI-to-truecolor line filter to the kept styles instead of to every segment of every new line.
The header (kept while its labels stay), row labels, fixed rows or columns, taller rows and other values are
drawn by DataTable itself. This relies on DataTable's private state (textual 8, `_PRIVATE`); without it,
DataTable draws and `update_cell` updates. Besides pmutop.tui.textual_private, this is the one module that
touches Textual's private API.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Self

from rich.cells import cell_len
from rich.color import Color as RichColor
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.color import Color
from textual.filter import ANSIToTruecolor
from textual.geometry import Region, Size
from textual.reactive import Reactive
from textual.strip import Strip
from textual.style import Style as VisualStyle
from textual.widgets import DataTable
from textual.widgets.data_table import CellDoesNotExist, Column, ColumnKey, RowKey

try:  # DataTable's map of row keys to positions (textual 8), for reorder
    from textual._two_way_dict import TwoWayDict
except ImportError:  # another Textual: the caller clears and adds the rows again
    TwoWayDict = None  # type: ignore[assignment,misc]

from pmutop.tui.widgets.cell_segments import cut_cells, fitting_layout, styled_cell
from pmutop.tui.widgets.table_pass import DrawnStyles, RenderPass

# DataTable's private state FastTable reads (textual 8); without it, DataTable draws and `update_cell` updates.
_PRIVATE_STATE = ("_data", "_row_locations", "_y_offsets", "_update_count", "_show_hover_cursor", "_styles_cache")
_PRIVATE_CACHES = ("_cell_render_cache", "_row_render_cache", "_row_renderable_cache", "_line_cache")
_PRIVATE = (*_PRIVATE_STATE, *_PRIVATE_CACHES, "_get_styles_to_render_cell")
_MAX_STYLES = 16384  # combined cell styles kept (a style per cell and look: 256 rows x 20 columns x a few)


class FastTable(DataTable[object]):
    _style_in_render: Style | None = None
    _components_in_render: dict[str, DrawnStyles] | None = None
    _columns_in_render: list[Column] | None = None
    _pass: RenderPass | None = None
    _in_render = False
    _plain_before = False
    _style_filter: tuple[ANSIToTruecolor, RichColor] | None = None  # applied to row styles in this pass
    _line_is_row = False  # the line just drawn is a row FastTable drew
    _header: tuple[object, Strip] | None = None  # DataTable's header line and what it was drawn for

    def __init__(self, *args: object, **kw: object) -> None:
        # The strip drawn for each row, with what it was drawn for (row index, cursor and hover on it).
        self._row_strips: dict[RowKey, tuple[object, Strip]] = {}
        self._row_strips_for: object = None  # the render pass settings the kept strips were drawn with
        # Combined styles: the same objects every interval, so nothing is added up again.
        self._styles: dict[tuple[object, ...], object] = {}
        self._keys: tuple[dict[str, RowKey], dict[str, ColumnKey]] = ({}, {})
        self._keys_for = -1  # the update count the key objects are of
        self._styles_for: object = None  # the line filter applied to the kept styles
        self._text_styles: dict[object, Style] = {}  # a Text's style (a name or a Style) as a Style
        self._uniform: tuple[int, bool] = (-1, False)  # (update count, every row one line high)
        self.rows_drawn = 0  # body rows drawn by FastTable itself (tests count them)
        super().__init__(*args, **kw)  # type: ignore[arg-type]
        self._fast = all(hasattr(self, name) for name in _PRIVATE)

    # The scrollable size: rows in or out change it most intervals (a process enters or leaves). Widget's
    # reactive lays out the whole screen for that (every widget placed again, every line repainted); the
    # table's box does not depend on it unless its height or width is auto, so only then is there a layout.
    # Otherwise the scrollbars follow (a scrollbar that appears or goes lays out by itself).
    virtual_size: Reactive[Size] = Reactive(Size(0, 0), layout=False, repaint=True)

    _removing_row = False

    def _box_follows_rows(self) -> bool:
        height, width = self.styles.height, self.styles.width
        return height is None or height.is_auto or width is None or width.is_auto

    def watch_virtual_size(self, size: Size) -> None:
        if self._box_follows_rows():
            self.refresh(layout=True)
        elif self.is_scrollable and self.container_size:
            self._scroll_update(size)

    def _update_dimensions(self, new_rows: Iterable[RowKey]) -> None:
        # DataTable measures every cell of each new row for its column's content width; a column of a set
        # width never uses it (the live view's columns all have one): then only the scroll range is updated.
        if self._fast and not any(column.auto_width for column in self.columns.values()):
            rows = self.rows
            if not any(row.label is not None or row.auto_height for row in map(rows.get, new_rows) if row):
                new_rows = ()
        super()._update_dimensions(new_rows)

    def remove_row(self, row_key: RowKey | str) -> None:
        # DataTable lays out the screen after a row goes; the scroll range is virtual_size's business.
        self._removing_row = True
        try:
            super().remove_row(row_key)
        finally:
            self._removing_row = False

    def refresh(self, *regions: Region, repaint: bool = True, layout: bool = False, recompose: bool = False) -> Self:
        if layout and self._removing_row and not self._box_follows_rows():
            layout = False
        return super().refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)

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
            styles = drawn[names[0]] = DrawnStyles(super().get_component_styles(*names))
        return styles

    @property
    def rich_style(self) -> Style:
        # DataTable asks for it on every line it draws, and it walks every ancestor's styles each time;
        # it cannot change while the table draws.
        style = self._style_in_render
        return style if style is not None else super().rich_style

    def notify_style_update(self) -> None:
        self._forget_strips()
        super().notify_style_update()

    def _forget_strips(self) -> None:
        self._header = None
        self._row_strips.clear()
        self._row_strips_for = None
        self._styles.clear()
        self._text_styles.clear()

    def render_lines(self, crop: Region) -> list[Strip]:
        self._style_in_render = None
        self._style_in_render = self.rich_style
        self._components_in_render = {}
        self._columns_in_render = None
        self._columns_in_render = self.ordered_columns
        self._pass = None
        self._in_render = True
        try:
            inner = self._plain_box()
            if inner is None:
                return super().render_lines(crop)
            self._pseudo_class_state = self.get_pseudo_class_state()  # (as DataTable.render_lines)
            return self._render_plain(crop, inner)
        finally:
            self._style_in_render = None
            self._components_in_render = None
            self._columns_in_render = None
            self._pass = None
            self._in_render = False
            self._style_filter = None

    # -- drawing

    def _plain_box(self) -> Style | None:
        """The style under the content when a line on screen is exactly the line drawn (no border, padding,
        outline, tint, opacity, hatch or link hover: what Textual's StylesCache.render_line then adds is
        the width and the app's line filters), else None: Textual's StylesCache draws the box."""
        styles = self.styles
        plain = (
            self._fast
            and not any(styles.gutter)
            and not any(edge for edge, _ in styles.outline)
            and not styles.tint.a
            and styles.text_opacity == 1.0
            and self.opacity == 1.0
            and not (styles.has_rule("hatch") and styles.hatch != "none")
            and not (self.auto_links and self.hover_style.link_id)
        )
        if not plain:
            if self._plain_before:
                self._styles_cache.clear()  # its lines were not kept up to date meanwhile
            self._plain_before = False
            return None
        self._plain_before = True
        base_background, background = self.background_colors
        return VisualStyle(background=base_background + background).rich_style

    def _render_plain(self, crop: Region, inner: Style) -> list[Strip]:
        """Widget.render_lines for a plain box: each line drawn, at the widget's width, through the app's
        line filters. The rows FastTable draws have Textual's ANSI-to-truecolor filter applied to their
        styles already (once per style, not per segment of every new line); a kept row is the same Strip
        object, so the other filters' results are kept on it too."""
        width = self.size.width
        background = self.background_colors[1]
        filters = list(self.get_line_filters())
        if filters and type(filters[0]) is ANSIToTruecolor:
            self._style_filter = (filters[0], background.rich_color)
            row_filters = filters[1:]
        else:
            self._style_filter = None
            row_filters = filters
        render_line = self.render_line
        strips = []
        for y in crop.line_range:
            self._line_is_row = False
            strip = render_line(y)
            if strip.cell_length != width:
                strip = strip.adjust_cell_length(width, inner)
            for line_filter in row_filters if self._line_is_row else filters:
                strip = strip.apply_filter(line_filter, background)
            strips.append(strip)
        if crop.column_span != (0, width):
            start, end = crop.column_span
            strips = [strip.crop(start, end) for strip in strips]
        return strips

    def _one_line_rows(self) -> bool:
        """Every row one line high (then row i is on line header + i), known per table update."""
        count = self._update_count
        if self._uniform[0] != count:
            self._uniform = (count, all(row.height == 1 for row in self.rows.values()))
        return self._uniform[1]

    def _can_draw_rows(self) -> bool:
        return (
            self._fast
            and not self.fixed_rows
            and not self.fixed_columns
            and not self._should_render_row_labels
            and self._one_line_rows()
        )

    def _start_pass(self) -> RenderPass | None:
        """The settings of this render pass, or None when DataTable draws every line itself."""
        if not self._can_draw_rows():
            return None
        drawn = RenderPass()
        drawn.base_style = self.rich_style
        drawn.pad = self.cell_padding
        drawn.columns = tuple((column.key, column.get_render_width(self)) for column in self.ordered_columns)
        drawn.table_width = sum(width for _, width in drawn.columns)
        drawn.width = self.size.width
        drawn.scroll_x, drawn.scroll_y = self.scroll_offset
        drawn.header_height = self.header_height if self.show_header else 0
        drawn.cursor_type = self.cursor_type
        drawn.cursor = self.cursor_coordinate
        drawn.hover = self.hover_coordinate
        drawn.show_cursor = self.show_cursor
        drawn.show_hover = self._show_hover_cursor
        drawn.fg_css = self.cursor_foreground_priority == "css"
        drawn.bg_css = self.cursor_background_priority == "css"
        if self.zebra_stripes:
            drawn.odd_style = self.get_component_styles("datatable--odd-row").rich_style
            drawn.even_style = self.get_component_styles("datatable--even-row").rich_style
        else:
            drawn.odd_style = drawn.even_style = drawn.base_style
        # Beyond the last column DataTable fades the row colour into the background (cursors other than rows).
        drawn.extend = self.background_colors[1] if drawn.cursor_type != "row" else None
        drawn.look = (
            drawn.base_style,
            drawn.odd_style,
            drawn.even_style,
            drawn.pad,
            drawn.columns,
            drawn.width,
            drawn.scroll_x,
            drawn.cursor_type,
            drawn.show_cursor,
            drawn.show_hover,
            drawn.fg_css,
            drawn.bg_css,
            drawn.extend,
            self._pseudo_class_state,
            self._style_filter,
        )
        drawn.key = (drawn.look, self._update_count)
        drawn.finish = self._style_filter
        if drawn.finish != self._styles_for:  # every kept style was filtered for another theme or colour
            self._styles.clear()
            self._styles_for = drawn.finish
        if drawn.key != self._row_strips_for:
            self._row_strips.clear()
            self._row_strips_for = drawn.key
        return drawn

    def render_line(self, y: int) -> Strip:
        if not self._in_render:
            return super().render_line(y)
        drawn = self._pass
        if drawn is None:
            drawn = self._pass = self._start_pass()
            if drawn is None:
                self._in_render = False  # DataTable draws the rest of this pass
                return super().render_line(y)
        if y < drawn.header_height:
            return self._header_line(y, drawn)
        row_index = y - drawn.header_height + drawn.scroll_y
        row_key = self._row_locations.get_key(row_index)
        if row_key is None:  # below the last row
            return super().render_line(y)
        cursor_type = drawn.cursor_type
        if cursor_type == "row":
            marks: object = (row_index, drawn.cursor.row == row_index, drawn.hover.row == row_index)
        elif cursor_type == "none":
            marks = (row_index,)
        else:
            marks = (row_index, drawn.cursor, drawn.hover)
        kept = self._row_strips.get(row_key)
        if kept is not None and kept[0] == marks:
            self._line_is_row = True
            return kept[1]
        strip = self._draw_row(row_key, row_index, drawn)
        if strip is None:
            return super().render_line(y)
        self._row_strips[row_key] = (marks, strip)
        self._line_is_row = True
        return strip

    def _header_line(self, y: int, drawn: RenderPass) -> Strip:
        """DataTable's header line, kept while the labels and the look stay: a reorder or new rows bump
        DataTable's update count, and with it DataTable renders every header cell through Rich again."""
        labels = tuple(
            (c.label.plain, c.label.style, c.label.justify, tuple(c.label.spans)) for c in self.ordered_columns
        )
        marks = (
            (drawn.cursor.row == -1, drawn.hover.row == -1)
            if drawn.cursor_type == "row"
            else (drawn.cursor, drawn.hover)
        )
        key = (y, drawn.look, labels, marks)
        if self._header is not None and self._header[0] == key:
            return self._header[1]
        strip = super().render_line(y)
        self._header = (key, strip)
        return strip

    def _cell_styles(self, row_index: int, row_style: Style, drawn: RenderPass) -> list[tuple[Style, Style, Style]]:
        """Per column of a row: the style before the text (row style + row/column meta for the mouse +
        cursor/hover style), the padding's style, and the cursor's CSS colours laid over everything
        (DataTable._render_cell's pre and post styles), worked out once and kept."""
        cursor_type, cursor, hover = drawn.cursor_type, drawn.cursor, drawn.hover
        marks: object
        if cursor_type == "row":
            marks = (cursor.row == row_index, hover.row == row_index)
        elif cursor_type == "cell":
            marks = (cursor.column if cursor.row == row_index else -1, hover.column if hover.row == row_index else -1)
        elif cursor_type == "column":
            marks = (cursor.column, hover.column)
        else:
            marks = None
        count = len(drawn.columns)
        key = (
            row_index,
            row_style,
            cursor_type,
            marks,
            count,
            drawn.show_cursor,
            drawn.show_hover,
            drawn.fg_css,
            drawn.bg_css,
        )
        styles = self._styles
        found: list[tuple[Style, Style, Style]] | None = styles.get(key)  # type: ignore[assignment]
        if found is None:
            found = []
            for column_index in range(count):
                if cursor_type == "row":
                    on_cursor, on_hover = marks  # type: ignore[misc]
                elif cursor_type == "cell":
                    on_cursor = cursor == (row_index, column_index)
                    on_hover = hover == (row_index, column_index)
                elif cursor_type == "column":
                    on_cursor, on_hover = cursor.column == column_index, hover.column == column_index
                else:
                    on_cursor = on_hover = False
                component, post = self._get_styles_to_render_cell(
                    False,
                    False,
                    False,
                    on_hover,
                    on_cursor,
                    drawn.show_cursor,
                    drawn.show_hover,
                    drawn.fg_css,
                    drawn.bg_css,
                )
                pre = row_style + Style.from_meta({"row": row_index, "column": column_index}) + component
                found.append((pre, self._finished(pre + post, drawn), post))
            if len(styles) >= _MAX_STYLES:
                styles.clear()
            styles[key] = found
        return found

    def _framed(self, pre: Style, style: Style | None, post: Style) -> Style:
        """A text's style within its cell: (pre + style) + post, kept."""
        key = (pre, style, post)
        styles = self._styles
        found = styles.get(key)
        if found is None:
            if len(styles) >= _MAX_STYLES:
                styles.clear()
            found = styles[key] = self._finished(pre + style + post, self._pass)
        return found  # type: ignore[return-value]

    @staticmethod
    def _finished(style: Style, drawn: RenderPass | None) -> Style:
        """The style as the line filter applied to row styles in this pass leaves it."""
        finish = drawn.finish if drawn is not None else None
        if finish is None:
            return style
        line_filter, background = finish
        return line_filter.truecolor_style(style, background)

    def _draw_row(self, row_key: RowKey, row_index: int, drawn: RenderPass) -> Strip | None:
        """The row's line as DataTable draws it (its _render_line_in_row and _render_cell), or None when a
        value is not a one-line Text that fits its column. Only the columns on screen are drawn."""
        data = self._data.get(row_key)
        if data is None:
            return None
        row_style = drawn.odd_style if row_index % 2 else drawn.even_style
        pad = drawn.pad
        framed = self._framed
        text_styles = self._text_styles
        console = self.app.console
        segments: list[Segment] = []
        add = segments.append
        start, end = drawn.scroll_x, drawn.scroll_x + drawn.width
        at = 0
        for (column_key, width), styles in zip(
            drawn.columns, self._cell_styles(row_index, row_style, drawn), strict=True
        ):
            cell_at, at = at, at + width
            if at <= start:  # left of the screen
                continue
            if cell_at >= end:  # right of the screen
                break
            value = data.get(column_key)
            if value is None:
                value = _EMPTY
            elif not isinstance(value, Text):
                return None
            plain = value.plain
            inner = width - 2 * pad
            length = len(plain) if plain.isascii() else cell_len(plain)
            left = fitting_layout(plain, length, inner, value.justify)
            if left is None:
                return None
            text_style = None
            if value.style:
                text_style = text_styles.get(value.style)
                if text_style is None:
                    text_style = text_styles[value.style] = console.get_style(value.style)
            mark = len(segments)
            if text_style is None and not value.spans:  # the common cell: one segment
                add(Segment(" " * (pad + left) + plain + " " * (inner - length - left + pad), styles[1]))
            else:
                segments += styled_cell(value, length, left, inner, pad, text_style, styles, framed, console)
            if cell_at < start or at > end:  # partly on screen
                segments[mark:] = cut_cells(segments[mark:], start - cell_at, end - cell_at)
        remaining = max(0, drawn.width - drawn.table_width)
        if remaining and at < end:
            mark, cell_at, at = len(segments), at, at + remaining
            add(Segment(" " * remaining, self._extend_style(row_index, row_style, drawn)))
            if cell_at < start or at > end:
                segments[mark:] = cut_cells(segments[mark:], start - cell_at, end - cell_at)
        shown = min(at, end) - start
        self.rows_drawn += 1
        return Strip(segments, max(0, shown)).adjust_cell_length(drawn.width, drawn.base_style)

    def _extend_style(self, row_index: int, row_style: Style, drawn: RenderPass) -> Style:
        """The style of the space right of the last column (DataTable._render_line_in_row)."""
        meta = (("row", row_index), ("column", 0), ("out_of_bounds", True))
        if drawn.cursor_type == "row":
            on_hover, on_cursor = drawn.hover.row == row_index, drawn.cursor.row == row_index
            flags = (False, False, False, on_hover, on_cursor, drawn.show_cursor, drawn.show_hover, False, False)
            component, _ = self._get_styles_to_render_cell(*flags)
            key: tuple[object, ...] = ("extend", row_style, component, meta)
            style = self._styles.get(key)
            if not isinstance(style, Style):
                style = row_style + component + Style.from_meta(dict(meta))
                style = self._styles[key] = self._finished(style, drawn)
            return style
        key = ("extend", row_style, meta, drawn.extend)
        style = self._styles.get(key)
        if not isinstance(style, Style):
            if row_style.bgcolor is not None and isinstance(drawn.extend, Color):
                faded = Color.from_rich_color(row_style.bgcolor).blend(drawn.extend, factor=0.25)
                style = Style.from_color(color=row_style.color, bgcolor=faded.rich_color)
            else:
                style = Style.from_color(row_style.color, row_style.bgcolor)
            style = self._styles[key] = self._finished(style + Style.from_meta(dict(meta)), drawn)
        return style

    # -- updating

    def set_cells(self, changes: Iterable[tuple[str, str, Text]]) -> None:
        """Show new values for (row key, column key) cells; the widths stay as they are."""
        if not self._fast:
            for row_key, column_key, value in changes:
                self.update_cell(row_key, column_key, value)
            return
        data = self._data
        row_keys, column_keys = self._key_objects()
        rows: set[RowKey] = set()
        for row_key, column_key, value in changes:
            # The table's own key objects: a lookup by string compares through RowKey.__eq__ (Python).
            row_object = row_keys.get(row_key)
            column_object = column_keys.get(column_key)
            row = data.get(row_object) if row_object is not None else None
            if row is None or column_object is None or column_object not in row:
                raise CellDoesNotExist(f"No cell exists for row_key={row_key!r}, column_key={column_key!r}.")
            row[column_object] = value
            rows.add(row_object)  # type: ignore[arg-type]
        if not rows:
            return
        self._forget_rows(rows)
        self._repaint_rows(rows)

    def reorder(self, keys: Sequence[str]) -> bool:
        """Put the table's rows in this order, as DataTable.sort does (no clear, no new rows: nothing is
        measured again and the header stays drawn); False, doing nothing, when `keys` are not its rows."""
        row_keys, _ = self._key_objects()
        same_rows = len(keys) == len(row_keys) == len(self.rows) and set(keys) == row_keys.keys()
        if not (self._fast and TwoWayDict is not None and same_rows):
            return False
        if [str(row.key.value) for row in self.ordered_rows] == list(keys):
            return True
        self._row_locations = TwoWayDict({row_keys[key]: index for index, key in enumerate(keys)})
        self._update_count += 1
        self.refresh()
        return True

    def _key_objects(self) -> tuple[dict[str, RowKey], dict[str, ColumnKey]]:
        """The row and column key objects by their strings, as of the table's last update."""
        count = self._update_count
        if self._keys_for != count:
            self._keys = (
                {key.value: key for key in self.rows if key.value is not None},
                {key.value: key for key in self.columns if key.value is not None},
            )
            self._keys_for = count
        return self._keys

    def _forget_rows(self, rows: set[RowKey]) -> None:
        """Drop every kept render of the changed rows (ours, and DataTable's for the lines it draws)."""
        row_strips = self._row_strips
        for row_key in rows:
            row_strips.pop(row_key, None)
        for cache in (self._cell_render_cache, self._row_render_cache):
            for key in [k for k in cache.keys() if k[0] in rows]:  # noqa: SIM118 (an LRUCache)
                cache.discard(key)  # type: ignore[arg-type]
        locations = self._row_locations
        indices = {locations.get(row_key) for row_key in rows}
        renderables = self._row_renderable_cache
        for renderable_key in [k for k in renderables.keys() if k[1] in indices]:  # noqa: SIM118 (an LRUCache)
            renderables.discard(renderable_key)
        self._line_cache.clear()  # keyed by screen line; holds only the lines DataTable draws itself

    def _repaint_rows(self, rows: set[RowKey]) -> None:
        """Mark only the changed rows' lines on screen for repainting: the other lines keep their strips in
        Textual's line cache (a refresh of the whole widget would drop them all)."""
        if not self._can_draw_rows() or not self.size.height:
            self.refresh()
            return
        header = self.header_height if self.show_header else 0
        top = round(self.scroll_y)
        height, width = self.size.height, self.size.width
        locations = self._row_locations
        indices = (locations.get(row_key) for row_key in rows)
        lines = sorted(
            y for y in (header + index - top for index in indices if index is not None) if header <= y < height
        )
        bands: list[Region] = []
        for y in lines:
            if bands and bands[-1].bottom == y:
                last = bands[-1]
                bands[-1] = Region(0, last.y, width, last.height + 1)
            else:
                bands.append(Region(0, y, width, 1))
        if bands:
            self.refresh(*bands)


_EMPTY = Text()
