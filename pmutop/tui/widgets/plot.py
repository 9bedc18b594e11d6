"""A multi-row history plot (block characters, eighths of a cell) on a stable 0..top scale, with a value
axis on the left and a time axis below, so a glance says how much and how long ago."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache

from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip
from textual.widget import Widget

from pmutop.tui.format import MARK, SPARK, nice_ceiling, time_axis
from pmutop.tui.model import Span, resample

_DIM = Style(dim=True)
_MARK = Style(color="yellow")
MIN_PLOT_ROWS = 3  # below this (plus the time axis) only the sparkline-like body is drawn
VALUE_LABEL = 5  # characters of the value axis' labels: plots side by side get the same width of time


@lru_cache(maxsize=4096)
def bar_column(eighths: int | None, rows: int) -> str:
    """One plot column, top row first: a bar `eighths` eighths of a cell high (None: no data, blank)."""
    if eighths is None:
        return " " * rows
    return "".join(SPARK[min(max(eighths - (rows - 1 - r) * 8, 0), 8)] for r in range(rows))


class HistoryPlot(Widget):
    def __init__(self, title: str, fmt: Callable[[float], str], floor: float, style: str, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.border_title = title
        self._fmt = fmt
        self._floor = floor
        self._style = style
        self._values: list[float | None] = []
        self._spans: list[Span] | None = None  # when each point was measured; None: one column per point
        self._end = 0.0
        self._marks: list[float] = []  # times where the interval changed
        self._top = floor
        self._interval = 1.0
        self._version = 0  # bumped by each update: the cached strips are for one version and size
        self._strips_key: tuple[int, int, int] | None = None
        self._base_style = Style()
        self._strips: list[Strip] = []

    def set_title(self, title: str) -> None:
        if self.border_title != title:
            self.border_title = title

    def set_values(
        self,
        values: Sequence[float | None],
        interval: float | None = None,
        *,
        spans: Sequence[Span] | None = None,
        end: float | None = None,
        marks: Sequence[float] = (),
    ) -> None:
        """The history, oldest first. With `spans` (when each point was measured) it is drawn against time:
        one column per `interval` seconds up to `end`, a mark where the interval changed (`marks`, times);
        without, one column per point of `interval` seconds."""
        if interval:
            self._interval = interval
        self._values = list(values)  # a few plots, at most HISTORY points each
        self._spans = list(spans) if spans is not None else None
        self._end = end if end is not None else (self._spans[-1][1] if self._spans else 0.0)
        self._marks = list(marks)
        present = [v for v in values if v is not None]
        top = nice_ceiling(max(present, default=0.0), self._floor)
        now = self._fmt(present[-1]) if present and values[-1] is not None else "-"
        peak = self._fmt(max(present)) if present else "-"
        self.border_subtitle = f"{now} now · {peak} max"
        self._top = top
        self._version += 1
        self.refresh()

    def render_line(self, y: int) -> Strip:
        """One line of the plot, from strips built once per update (a line-API widget: no markup, wrapping
        or line splitting on the way to the screen)."""
        size = self.content_size
        key = (size.width, size.height, self._version)
        if self._strips_key != key:
            self._strips_key = key
            base = self._base_style = self.rich_style
            # The widget's style under each segment, as Strip.apply_style would put it, in one Strip a line.
            self._strips = [
                Strip([Segment(text, base + style if style else base) for text, style, _ in line], size.width)
                for line in self._lines(size.width, size.height)
            ]
        if 0 <= y < len(self._strips):
            return self._strips[y]
        return Strip.blank(size.width, self._base_style)

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._strips_key = None  # the colours under the plot changed

    def _lines(self, width: int, height: int) -> list[list[Segment]]:
        if width <= 0 or height <= 0:
            return []
        dim, bar = _DIM, Style.parse(self._style)
        axes = height >= MIN_PLOT_ROWS + 1 and width >= 20
        labels = [self._fmt(self._top), self._fmt(self._top / 2), "0"] if axes else []
        gutter = max(VALUE_LABEL, *map(len, labels)) + 1 if axes else 0
        rows_n = height - 1 if axes else height
        cols = width - gutter
        step = self._interval
        marks: list[int] = []
        if self._spans is not None:  # against time: a column is `step` seconds, whatever the points lasted
            tail = resample(self._values, self._spans, self._end, step, cols)
            left = self._end - cols * step
            marks = [round((at - left) / step) for at in self._marks if left < at <= self._end + step]
            marks = [min(c, cols - 1) for c in marks]
        else:
            kept = self._values[-cols:]
            padding: list[float | None] = [None] * (cols - len(kept))
            tail = padding + kept
        top = self._top
        # Each point's height in eighths of a cell, computed once for all rows.
        eighths = rows_n * 8
        heights = [None if v is None else round(min(max(v / top, 0.0), 1.0) * eighths) if top > 0 else 0 for v in tail]
        # Columns (cached by height) turned into rows: no Python work per cell.
        columns = [bar_column(h, rows_n) for h in heights]  # one per point: cols of them
        rows = ["".join(r) for r in zip(*columns, strict=True)] if columns else [""] * rows_n
        out: list[list[Segment]] = []
        for r, cells in enumerate(rows):
            line: list[Segment] = []
            if axes:
                label = labels[0] if r == 0 else labels[1] if r == rows_n // 2 else labels[2] if r == rows_n - 1 else ""
                line.append(Segment(label.rjust(gutter - 1) + "┤" if label else " " * (gutter - 1) + "│", dim))
            line.extend(self._marked(cells, marks, bar))
            out.append(line)
        if axes:
            axis = time_axis(cols, step, marks=marks)
            line = [Segment(" " * (gutter - 1) + "└", dim)]
            start = 0
            for x, ch in enumerate(axis):
                if ch == MARK:
                    line += [Segment(axis[start:x], dim), Segment(MARK, _MARK)]
                    start = x + 1
            line.append(Segment(axis[start:], dim))
            out.append(line)
        return out

    @staticmethod
    def _marked(cells: str, marks: list[int], bar: Style) -> list[Segment]:
        """A row of the plot, with a dotted line in the empty cells of the columns where the interval changed."""
        if not marks:
            return [Segment(cells, bar)]
        out, start = [], 0
        for c in sorted(set(marks)):
            if cells[c] == " ":
                out += [Segment(cells[start:c], bar), Segment("┊", _MARK)]
                start = c + 1
        out.append(Segment(cells[start:], bar))
        return out
