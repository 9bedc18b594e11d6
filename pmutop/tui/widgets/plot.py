"""A multi-row history plot (block characters, eighths of a cell) on a stable 0..top scale, with a value
axis on the left and a time axis below, so a glance says how much and how long ago."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Self

from rich.segment import Segment
from rich.style import Style
from textual.app import ComposeResult
from textual.filter import LineFilter
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget

from pmutop.tui.format import MARK, SPARK, nice_ceiling, time_axis
from pmutop.tui.model import Span, resample
from pmutop.tui.widgets.kept_lines import KeptLines

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


@lru_cache(maxsize=64)
def _time_axis_line(gutter: int, cols: int, step: float, marks: tuple[int, ...]) -> tuple[Segment, ...]:
    """A plot's time axis under `cols` columns of `step` seconds (the same every interval of a run)."""
    axis = time_axis(cols, step, marks=marks)
    line = [Segment(" " * (gutter - 1) + "└", _DIM)]
    start = 0
    for x, ch in enumerate(axis):
        if ch == MARK:
            line += [Segment(axis[start:x], _DIM), Segment(MARK, _MARK)]
            start = x + 1
    line.append(Segment(axis[start:], _DIM))
    return tuple(line)


class PlotLines(Widget):
    """A plot's lines inside its box. The box (border, titles, padding) is the HistoryPlot around it, which
    Textual draws and keeps; this draws only the lines, each a Strip built once per update with the app's
    line filters applied then, not through Textual's StylesCache (which adds a box's edges, padding and
    filters to every line of every frame: most of the live view's drawing, four plots redrawn a second)."""

    DEFAULT_CSS = "PlotLines { width: 1fr; height: 1fr; }"

    def __init__(self, plot: HistoryPlot) -> None:
        super().__init__()
        self._plot = plot
        self._key: tuple[object, ...] | None = None
        self._strips: list[Strip] = []
        # A segment's style as drawn, by its plot style, for one set of line filters (emptied on a style change).
        self._styles: dict[Style | None, Style] = {}
        self._styles_for: tuple[LineFilter, ...] = ()

    def render_lines(self, crop: Region) -> list[Strip]:
        strips = self._drawn()
        width = self.size.width
        lines = [strips[y] if 0 <= y < len(strips) else Strip.blank(width, self.rich_style) for y in crop.line_range]
        if crop.column_span != (0, width):
            start, end = crop.column_span
            lines = [line.crop(start, end) for line in lines]
        return lines

    def render_line(self, y: int) -> Strip:
        strips = self._drawn()
        return strips[y] if 0 <= y < len(strips) else Strip.blank(self.size.width, self.rich_style)

    def redraw(self) -> None:
        """A new version of the plot: refresh only the lines that differ from the ones drawn (most of a plot
        stays: rows wholly under or over every bar, the axes), so the screen composes and sends only those."""
        drawn, was = self._strips, self._key
        if not self.is_mounted or was is None or not self.size.area:
            self.refresh()
            return
        strips = self._drawn()
        if self._key is None or len(drawn) != len(strips) or (was[0], was[1], was[3]) != self._key[:2] + self._key[3:]:
            self.refresh()
            return
        width, start = self.size.width, None
        for y, (old, new) in enumerate([*zip(drawn, strips, strict=True), (None, None)]):
            if old is not None and old != new:
                start = y if start is None else start
            elif start is not None:
                self.refresh(Region(0, start, width, y - start))  # one region per run of changed lines
                start = None

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._key = None  # the colours under the plot changed
        self._styles = {}

    def _drawn(self) -> list[Strip]:
        size = self.size
        filters = tuple(self.get_line_filters())
        key = (size.width, size.height, self._plot.version, filters)
        if self._key != key:
            self._key = key
            if filters != self._styles_for:
                self._styles, self._styles_for = {}, filters
            styles = self._styles
            strips = []
            for line in self._plot.lines(size.width, size.height):
                segments = []
                for text, style, _ in line:
                    drawn = styles.get(style)
                    if drawn is None:
                        drawn = styles[style] = self._drawn_style(style, filters)
                    segments.append(Segment(text, drawn))
                strips.append(Strip(segments, size.width))
            self._strips = strips
        return self._strips

    def _drawn_style(self, style: Style | None, filters: tuple[LineFilter, ...]) -> Style:
        """A segment's style as drawn: the widget's style under it (as Strip.apply_style puts it), then the app's
        line filters. Each filter maps a segment's style alone, whatever its text, so this is worked out once
        per style, not for every segment of every line (a plot has three styles and a dozen lines a second)."""
        drawn = self.rich_style + style if style else self.rich_style
        background = self.background_colors[1]
        for line_filter in filters:
            drawn = line_filter.apply([Segment(" ", drawn)], background)[0].style or drawn
        return drawn


class HistoryPlot(KeptLines):
    """A plot in a box with its title on the top edge and "now · max" on the bottom one. The box keeps its
    drawn lines (KeptLines): the plot inside is drawn again every interval, the box only when its titles change."""

    _bottom_edge_only = False  # a change of the subtitle: only the bottom edge is drawn again

    def __init__(self, title: str, fmt: Callable[[float], str], floor: float, style: str, **kw: object) -> None:
        super().__init__(**kw)
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
        self.version = 0  # bumped by each update: the drawn lines are for one version and size
        self.body = PlotLines(self)
        self._subtitle: str | None = None

    def compose(self) -> ComposeResult:
        yield self.body

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
        subtitle = f"{now} now · {peak} max"
        if subtitle != self._subtitle:
            self._subtitle = subtitle
            self._bottom_edge_only = True  # the box's other lines stay as drawn
            try:
                self.border_subtitle = subtitle
            finally:
                self._bottom_edge_only = False
        self._top = top
        self.version += 1
        self.body.redraw()

    def refresh(self, *regions: Region, repaint: bool = True, layout: bool = False, recompose: bool = False) -> Self:
        if self._bottom_edge_only and not regions and not layout and not recompose and self.size.height:
            # A region given to refresh is of the content, inside the edges: the bottom edge is below it.
            left, top = self.content_offset
            outer = self.outer_size
            regions = (Region(-left, outer.height - 1 - top, outer.width, 1),)
        return super().refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)

    def lines(self, width: int, height: int) -> list[list[Segment]]:
        """The plot's lines for a `width` x `height` box: value axis, bars and time axis."""
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
            out.append(list(_time_axis_line(gutter, cols, step, tuple(marks))))
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
