"""A multi-row history plot (block characters, eighths of a cell) on a stable 0..top scale."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rich.text import Text
from textual.widget import Widget

from pmutop.tui.format import SPARK, nice_ceiling


class HistoryPlot(Widget):
    DEFAULT_CSS = """
    HistoryPlot { width: 1fr; height: 1fr; min-height: 4; border: round $panel-lighten-2; padding: 0 1; }
    """

    def __init__(self, title: str, fmt: Callable[[float], str], floor: float, style: str, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.border_title = title
        self._fmt = fmt
        self._floor = floor
        self._style = style
        self._values: list[float | None] = []

    def set_values(self, values: Sequence[float | None]) -> None:
        self._values = list(values)
        present = [v for v in self._values if v is not None]
        top = nice_ceiling(max(present, default=0.0), self._floor)
        now = self._fmt(present[-1]) if present and self._values[-1] is not None else "-"
        peak = self._fmt(max(present)) if present else "-"
        self.border_subtitle = f"{now} now · {peak} max · 0–{self._fmt(top)}"
        self._top = top
        self.refresh()

    def render(self) -> Text:
        width, height = self.content_size.width, self.content_size.height
        if width <= 0 or height <= 0:
            return Text("")
        tail = self._values[-width:]
        tail = [None] * (width - len(tail)) + tail
        top = getattr(self, "_top", self._floor)
        rows: list[str] = []
        for r in range(height):
            base = (height - 1 - r) * 8  # eighths below this row
            line = []
            for v in tail:
                if v is None:
                    line.append(" ")
                    continue
                eighths = round(min(max(v / top, 0.0), 1.0) * height * 8) if top > 0 else 0
                line.append(SPARK[min(max(eighths - base, 0), 8)])
            rows.append("".join(line))
        return Text("\n".join(rows), style=self._style)
