"""Small modal choosers: one item from a list (sort column, heatmap metric) or several (columns shown)."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.widgets import OptionList, SelectionList, Static
from textual.widgets.option_list import Option

from pmutop.tui.heatmap import METRICS, Metric, rate_metric
from pmutop.tui.model import ViewModel
from pmutop.tui.screens.base import CancellableModal

# The counted events a heatmap metric is computed from: measured when all are counted (util always is:
# from ref cycles, or from the kernel's per-CPU times).
METRIC_NEEDS: dict[str, tuple[str, ...]] = {
    "ipc": ("instructions", "cycles"),
    "util": (),
    "ghz": ("cycles", "ref_cycles"),
    "llc_misses_per_s": ("llc_misses",),
}


def measured_metrics(model: ViewModel, keys: list[str], topdown: bool) -> list[Metric]:
    """The heatmap metrics this run measures, in pmutop.tui.heatmap's order, then a rate per other counted
    event (a software-only run's context switches, migrations, faults). The rest (top-down, power) count
    once some row has a value, or `topdown` says a CPU measures it."""
    counted = set(keys)
    rows = [*model.cores.values(), model.total]

    def has_values(key: str) -> bool:
        return any(v is not None for core in rows for v in core.history.get(key, ()))

    out = []
    for m in METRICS:
        needs = METRIC_NEEDS.get(m.key)
        static = needs is not None and set(needs) <= counted
        if static or (m.key.startswith("tma_") and topdown) or has_values(m.key):
            out.append(m)
    out += [rate_metric(k) for k in model.rate_keys]
    return out


def first_measured(measured: list[Metric], *wanted: str | None) -> Metric:
    """The first of `wanted` (the one asked for, the saved one) this run measures; else the first measured."""
    by_key = {m.key: m for m in measured}
    return next((by_key[k] for k in wanted if k in by_key), measured[0])


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
        self.set_focus(options)  # now: keys typed right after the one that opened this are its

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)


class ColumnList(SelectionList[str]):
    """The columns' list: Enter applies the choice (a list's own Enter toggles, as Space does). A binding of
    the list, not a priority one of the screen: Enter then comes after the Space typed before it."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("enter", "screen.apply", "Apply")]

    def action_select(self) -> None:
        """Toggle now, not when the list's own message arrives: an Enter typed right after sees it."""
        if self.highlighted is not None:
            self.toggle(self.get_option_at_index(self.highlighted))


class ColumnsScreen(CancellableModal[list[str] | None]):
    """Tick the columns to show: Space toggles, Enter applies, Esc cancels."""

    def __init__(
        self, columns: list[tuple[str, str]], shown: set[str], fixed: set[str], fitting: set[str] | None = None
    ) -> None:
        """`columns`: (key, title); `shown`: the ones chosen (ticked); `fixed` columns cannot be turned off (the
        CPU column); `fitting`: the ones on screen now: a chosen column the width leaves out says so."""
        super().__init__()
        room = "   (no room at this width)"
        fits = set(shown) if fitting is None else fitting
        self.columns = [(k, t + ("" if k in fits or k not in shown else room)) for k, t in columns if k not in fixed]
        self.shown = shown

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("Columns", classes="picker-title")
            yield ColumnList(*((t, k, k in self.shown) for k, t in self.columns), id="columns")
            yield Static("Space: show/hide · Enter: apply · Esc: cancel", classes="picker-hint")

    def on_mount(self) -> None:
        self.set_focus(self.query_one(SelectionList))  # now: keys typed in the same burst are its

    def action_apply(self) -> None:
        self.dismiss(list(self.query_one(SelectionList).selected))
