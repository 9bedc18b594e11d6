"""Small modal choosers: one item from a list (sort column, heatmap metric) or several (columns shown)."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, SelectionList, Static
from textual.widgets.option_list import Option

PICKER_CSS = """
{name} {{ align: center middle; }}
{name} > Vertical {{ width: 56; height: auto; max-height: 90%; border: thick $accent; background: $surface;
                     padding: 0 1; }}
{name} .picker-title {{ text-style: bold; height: auto; }}
{name} .picker-hint {{ color: $text-muted; height: auto; }}
{name} OptionList, {name} SelectionList {{ height: auto; max-height: 20; }}
"""


class ChoiceScreen(ModalScreen[str | None]):
    """Pick one: Enter chooses, Esc keeps what was there."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss_none", "Cancel")]
    DEFAULT_CSS = PICKER_CSS.format(name="ChoiceScreen")

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

    def action_dismiss_none(self) -> None:
        self.dismiss(None)


class ColumnsScreen(ModalScreen[list[str] | None]):
    """Tick the columns to show: Space toggles, Enter applies, Esc cancels."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss_none", "Cancel"),
        Binding("enter", "apply", "Apply", priority=True),
    ]
    DEFAULT_CSS = PICKER_CSS.format(name="ColumnsScreen")

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

    def action_dismiss_none(self) -> None:
        self.dismiss(None)


class FilterBar(Input):
    """The `/` filter line at the bottom: Enter applies, Esc closes it (the filter stays)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "close", "Close")]

    def action_close(self) -> None:
        self.display = False
        self.app.set_focus(None)
        self.app.query_one("#cores").focus()
