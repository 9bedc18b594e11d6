"""Small modal choosers: one item from a list (sort column, heatmap metric) or several (columns shown)."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.widgets import OptionList, SelectionList, Static
from textual.widgets.option_list import Option

from pmutop.tui.screens.base import CancellableModal


class ChoiceScreen(CancellableModal[str | None]):
    """Pick one: Enter chooses, Esc keeps what was there."""

    def __init__(self, title: str, choices: list[tuple[str, str]], current: str | None) -> None:
        """`choices`: (key, label) pairs."""
        super().__init__()
        self.title_text = title
        self.choices = choices
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self.title_text, classes="picker-title")
            yield OptionList(*(Option(label, id=key) for key, label in self.choices), id="choices")
            yield Static("Enter: choose · Esc: cancel", classes="picker-hint")

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        keys = [k for k, _ in self.choices]
        if self.current in keys:
            options.highlighted = keys.index(self.current)
        options.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)


class ColumnsScreen(CancellableModal[list[str] | None]):
    """Tick the columns to show: Space toggles, Enter applies, Esc cancels."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("enter", "apply", "Apply", priority=True)]  # after Esc

    def __init__(self, columns: list[tuple[str, str]], shown: set[str], fixed: set[str]) -> None:
        """`columns`: (key, title); `fixed` columns cannot be turned off (the CPU column)."""
        super().__init__()
        self.columns = [(k, t) for k, t in columns if k not in fixed]
        self.shown = shown

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("Columns", classes="picker-title")
            yield SelectionList[str](*((t, k, k in self.shown) for k, t in self.columns), id="columns")
            yield Static("Space: show/hide · Enter: apply · Esc: cancel", classes="picker-hint")

    def on_mount(self) -> None:
        self.query_one(SelectionList).focus()

    def action_apply(self) -> None:
        self.dismiss(list(self.query_one(SelectionList).selected))
