"""A widget that keeps the lines Textual drew for it until something about it changes.

Whenever any part of the screen changes, Textual's compositor asks every widget under the changed area (in
practice: under the box around all changes of a frame, most of the screen once a second) for all of its lines,
and a widget drawn through Textual's StylesCache (edges, padding, background, text) works each of them out
again. For the widgets of the live view that change rarely (the screen's background, the plots' boxes and
their container, header lines between their updates) that was a good part of every frame's cost. These keep
their lines and draw a line again only after a refresh that covers it, a style change, new line filters or a
new size."""

from __future__ import annotations

from typing import Any, Self

from textual.geometry import Region
from textual.screen import Screen
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Footer, Static


class KeptLines(Widget):
    """A base of a widget class, or a mixin after a Textual widget class: `class Box(Static, KeptLines)` (Textual
    takes a widget's CSS type names from its first bases, so Static's own styles still apply)."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        self._kept: dict[int, Strip] = {}  # drawn lines by y (of the outer region)
        self._kept_key: tuple[object, ...] | None = None  # what they were drawn for: outer size, line filters
        super().__init__(*args, **kw)

    def refresh(self, *regions: Region, repaint: bool = True, layout: bool = False, recompose: bool = False) -> Self:
        kept: dict[int, Strip] | None = getattr(self, "_kept", None)  # None: a refresh from Widget.__init__
        if kept is not None and (repaint or layout or recompose):
            if regions and not layout and not recompose:
                # Regions given to refresh are of the content: the lines they cover are below its offset.
                top = self.content_offset.y
                for region in regions:
                    for y in region.line_range:
                        kept.pop(y + top, None)
            else:
                kept.clear()
        return super().refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._kept.clear()

    def render_lines(self, crop: Region) -> list[Strip]:
        outer = self.outer_size
        key = (outer, tuple(self.get_line_filters()))
        if key != self._kept_key:
            self._kept_key = key
            self._kept.clear()
        kept = self._kept
        missing = [y for y in crop.line_range if y not in kept]
        if missing:
            first, end = min(missing), max(missing) + 1
            drawn = super().render_lines(Region(0, first, outer.width, end - first))
            kept.update(zip(range(first, end), drawn, strict=True))
        if crop.column_span == (0, outer.width):
            return [kept[y] for y in crop.line_range]
        start, end = crop.column_span
        return [kept[y].crop(start, end) for y in crop.line_range]


class KeptStatic(Static, KeptLines):
    """A Static (the live view's header lines) drawn again only when updated."""


class KeptScreen(Screen[object], KeptLines):
    """The table's screen: its background, under every widget, drawn again only on a change of its own."""


class KeptFooter(Footer, KeptLines):
    """The key bar: its own background drawn again only when it changes (its keys are widgets of their own)."""
