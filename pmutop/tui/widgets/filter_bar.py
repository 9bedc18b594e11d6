"""The `/` filter line under the table."""

from __future__ import annotations

from typing import ClassVar

from textual.binding import Binding, BindingType
from textual.widgets import Input


class FilterBar(Input):
    """The `/` filter line at the bottom: Enter applies, Esc closes it (the filter stays)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "close", "Close")]

    def action_close(self) -> None:
        self.display = False
        self.app.set_focus(None)
        self.app.query_one("#cores").focus()
