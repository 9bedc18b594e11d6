"""What the screens share: the app as they see it (LiveView), the keys every full-screen view has, the
base of the views the app refreshes each interval, and the base of the modals Esc cancels."""

from __future__ import annotations

from typing import ClassVar, Protocol, TypeVar, cast

from textual.binding import Binding, BindingType
from textual.screen import ModalScreen, Screen

from pmutop.core.dram_reading import PackageFeed
from pmutop.core.feed import SampleFeed
from pmutop.core.run_description import RunInfo
from pmutop.tui.model import ViewModel
from pmutop.tui.widgets.history_panel import PlotSpec
from pmutop.tui.widgets.kept_lines import KeptLines

ResultT = TypeVar("ResultT")

# What every view adds to its own keys: nothing now. The app's Help and Quit apply on every view and the
# footer shows them; a view's own copy listed them twice (the footer groups keys by action).
VIEW_KEYS: tuple[BindingType, ...] = ()


class LiveView(Protocol):
    """What the screens read from the app (pmutop.tui.app.PmutopApp)."""

    model: ViewModel
    info: RunInfo
    feed: SampleFeed
    plot_specs: list[PlotSpec]
    package_feed: PackageFeed | None  # DRAM bandwidth per package and channel; None: nothing measures it
    dram_note: str | None  # why there is no package feed, when the caller knows

    def shown_formulas(self) -> list[tuple[str, str]]: ...


class ViewScreen(Screen[None], KeptLines):
    """A view that replaces the table (detail, top-down, heatmap): while one is on top the app hands it
    each interval's model instead of updating the hidden table."""

    @property
    def live(self) -> LiveView:
        return cast(LiveView, self.app)

    def refresh_from(self, model: ViewModel) -> object:
        raise NotImplementedError

    def refresh_dram(self) -> None:
        """New DRAM figures (the package feed's seq moved): the views that show them redraw those parts."""


class CancellableModal(ModalScreen[ResultT]):
    """A small modal that Esc closes with no result."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss_none", "Cancel")]

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
