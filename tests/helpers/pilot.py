"""Reading what a Textual app shows, for Pilot tests."""

from __future__ import annotations

import io

from rich.console import Console
from textual.app import App
from textual.widgets import Static


def screen_text(app: App[object]) -> str:
    """Every line of the active screen as plain text, right-trimmed (what a person reads)."""
    return "\n".join("".join(s.text for s in strip).strip() for strip in app.screen._compositor.render_strips())


def text_of(widget: Static, width: int = 200) -> str:
    """What a Static shows, as plain text (it may hold a Rich table)."""
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(widget.content)
    return console.export_text()
