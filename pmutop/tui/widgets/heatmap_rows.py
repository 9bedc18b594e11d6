"""The heatmap's coloured rows as a widget that repaints only the lines whose content changed."""

from __future__ import annotations

from rich.segment import Segment
from rich.text import Text
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.widget import Widget

from pmutop.tui.heatmap import Levels, row_text


class HeatmapRows(Widget):
    """The coloured rows, drawn line by line: a refresh repaints only the lines whose content changed."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.lines: list[Text] = []
        self._keys: list[tuple[str, int, int, Levels]] = []  # what each line shows, to see what changed
        self._strips: dict[int, Strip] = {}

    def set_rows(self, rows: list[tuple[str, Levels]], label_width: int, cell: int) -> int:
        """Show one line per (label, levels); only changed lines are rebuilt and repainted. Returns how many."""
        keys = [(label, label_width, cell, steps) for label, steps in rows]
        old = self._keys
        if len(keys) != len(old):
            self.lines = [Text()] * len(keys)
            changed = list(range(max(len(keys), len(old))))
            self.refresh(layout=True)  # as tall as its rows: the time axis follows right below
        else:
            changed = [y for y, (a, b) in enumerate(zip(keys, old, strict=True)) if a != b]
        self._keys = keys
        width = self.size.width
        for y in changed:
            if y < len(keys):
                label, _, _, steps = keys[y]
                self.lines[y] = row_text(label, label_width, steps, cell)
            self._strips.pop(y, None)
            self.refresh(Region(0, y, width, 1))
        return len(changed)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self.lines)

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if y >= len(self.lines):
            return Strip.blank(width, self.rich_style)
        strip = self._strips.get(y)
        if strip is None or strip.cell_length != width:
            segments = list(self.lines[y].render(self.app.console))
            strip = Strip([s for s in segments if s.text != "\n"] or [Segment("")]).crop_extend(
                0, width, self.rich_style
            )
            self._strips[y] = strip
        return strip
