"""`python benchmarks/floor_textual.py idle|redraw`: the least a Textual app costs, for the live view's
figures to be read against. `idle`: an app that shows one screen and never changes it; `redraw`: one
line-API widget filling the terminal, every line new once a second (the cheapest full-screen update Textual
has: no CSS border, no markup, no table)."""

from __future__ import annotations

import sys

from rich.segment import Segment
from textual.app import App, ComposeResult
from textual.strip import Strip
from textual.widget import Widget


class _Lines(Widget):
    DEFAULT_CSS = "_Lines { height: 1fr; }"

    def __init__(self) -> None:
        super().__init__()
        self.frame = 0

    def render_line(self, y: int) -> Strip:
        return Strip([Segment(f"{self.frame + y:>6}" * (self.size.width // 6))])


class FloorApp(App[None]):
    def __init__(self, redraw: bool) -> None:
        super().__init__()
        self.redraw = redraw

    def compose(self) -> ComposeResult:
        yield _Lines()

    def on_mount(self) -> None:
        if self.redraw:
            self.set_interval(1.0, self._next_frame)

    def _next_frame(self) -> None:
        lines = self.query_one(_Lines)
        lines.frame += 1
        lines.refresh()


if __name__ == "__main__":
    FloorApp(redraw=sys.argv[1:] == ["redraw"]).run()
