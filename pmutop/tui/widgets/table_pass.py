"""What FastTable keeps for one render pass: a component's styles worked out once, and the settings every
row drawn in the pass shares (pmutop.tui.widgets.fast_table)."""

from __future__ import annotations

from rich.color import Color as RichColor
from rich.style import Style
from textual.color import Color
from textual.coordinate import Coordinate
from textual.filter import ANSIToTruecolor
from textual.widgets.data_table import ColumnKey


class DrawnStyles:
    """A component's styles with its Rich style worked out once per draw (DataTable asks for the header and
    row styles on every line, and each ask walks the CSS again); anything else is the real object's."""

    __slots__ = ("_styles", "rich_style")

    def __init__(self, styles: object) -> None:
        self._styles = styles
        self.rich_style = styles.rich_style  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self._styles, name)


class RenderPass:
    """What every row drawn in one render pass shares (each read of a reactive costs a few µs)."""

    base_style: Style
    bg_css: bool
    columns: tuple[tuple[ColumnKey, int], ...]
    cursor: Coordinate
    cursor_type: str
    even_style: Style
    extend: Color | None
    fg_css: bool
    finish: tuple[ANSIToTruecolor, RichColor] | None
    header_height: int
    hover: Coordinate
    key: tuple[object, ...]
    look: tuple[object, ...]  # the key less DataTable's update count (bumped by every change of rows)
    odd_style: Style
    pad: int
    scroll_x: int
    scroll_y: int
    show_cursor: bool
    show_hover: bool
    table_width: int
    width: int
