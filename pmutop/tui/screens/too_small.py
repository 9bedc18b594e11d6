"""What a terminal below the live view's minimum size shows instead."""

from __future__ import annotations

from typing import ClassVar

from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import Static

MIN_SIZE = (40, 12)  # below this one line says the terminal is too small


class TooSmallScreen(Screen[None]):
    """Shown instead of any view while the terminal is below MIN_SIZE: a short message, no broken layout."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("q", "app.quit", "Quit")]

    def compose(self) -> ComposeResult:
        yield Static(id="too-small")

    def show(self, width: int, height: int) -> None:
        self.query_one(Static).update(too_small_text(width, height))


def too_small_text(width: int, height: int) -> str:
    """The message in lines no wider than `width` where the words allow (it is shown on a narrow terminal,
    so one line would be cut)."""
    need_w, need_h = MIN_SIZE
    lines: list[str] = []
    for word in f"terminal too small ({width}x{height}): pmutop needs {need_w}x{need_h}".split():
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return "\n".join(lines)


def too_small(width: int, height: int) -> bool:
    return width < MIN_SIZE[0] or height < MIN_SIZE[1]


def check_size(app: App[int], width: int, height: int) -> None:
    """Put the message over the views while the terminal is below MIN_SIZE, and take it away after."""
    if too_small(width, height):
        if not isinstance(app.screen, TooSmallScreen):
            app.push_screen(TooSmallScreen())

        def show() -> None:
            if isinstance(app.screen, TooSmallScreen):
                app.screen.show(width, height)

        app.call_after_refresh(show)
    elif isinstance(app.screen, TooSmallScreen):
        app.pop_screen()
