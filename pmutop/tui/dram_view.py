"""The live view's DRAM bandwidth: polls the package feed (pmutop.core.dram_reading.PackageFeed) and, only when
its seq moved, hands the new figures to the model, the package rows, the header's lines and the view on top.
A part of PmutopApp (a base class), kept apart so the app module stays about composing and the table."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from pmutop.core.dram_reading import SOURCE_SIMULATED, PackageDram, PackageFeed
from pmutop.core.run_description import RunInfo
from pmutop.tui.dram_text import dram_lines, estimate_line
from pmutop.tui.screens.base import ViewScreen
from pmutop.tui.table_controller import CoreTable
from pmutop.tui.views import ViewKeys


class DramView(ViewKeys):
    package_feed: PackageFeed | None
    dram_note: str | None
    core_table: CoreTable
    info: RunInfo
    paused: bool
    dram_rows = 0  # header lines the DRAM figures take now
    _dram_seq = -1
    _dram_packages: list[PackageDram] | None = None
    _dram_failure_said = False
    _dram_drawn: tuple[object, ...] | None = None  # what the lines were drawn from: redrawn only when it moved

    def _fit(self) -> None:
        raise NotImplementedError

    def poll_dram(self) -> None:
        """After each update and every second; nothing but one comparison when the feed has not moved (or the
        display is paused: the figures then wait with the rest)."""
        feed = self.package_feed
        if feed is None or self.paused:
            return
        failure = getattr(feed, "failure", None)  # the engine's sampler: a source that broke, said once
        if failure and not self._dram_failure_said:
            self._dram_failure_said = True
            self.notify(failure, title="DRAM bandwidth", severity="error", timeout=10)
        seq = feed.seq
        if seq == self._dram_seq:
            return
        packages = feed.latest()
        if packages is None:
            return
        self._dram_seq = seq
        self._dram_packages = packages
        self.model.set_dram(packages)
        if isinstance(self.screen, ViewScreen):
            self.screen.refresh_dram()
            self.core_table.update_dram_rows(hidden=True)
        elif self.screen is self.screen_stack[0]:
            with self.batch_update():
                self.core_table.update_dram_rows()
        self.draw_dram()

    def dram_texts(self) -> list[Text]:
        """The header's DRAM lines: measured per socket, or the estimate from LLC misses when no source
        measures DRAM traffic (nothing when neither is there)."""
        width, height = self.size
        if self.package_feed is None:
            line = estimate_line(self.model.total.latest)
            return [line] if line is not None else []
        simulated = self.package_feed.source_name == SOURCE_SIMULATED and not self.info.simulated
        return dram_lines(self._dram_packages or [], width, height, "SIMULATED" if simulated else None)

    def draw_dram(self) -> None:
        """The header's DRAM lines, rebuilt only when their figures or the terminal's size changed (the header
        is redrawn every interval and every second)."""
        if self.table_covered():  # drawn when the table is back (the header is then redrawn)
            return
        source = self._dram_seq if self.package_feed is not None else id(self.model.total.latest)
        key = (source, self.size.width, self.size.height)
        if key == self._dram_drawn:
            return
        self._dram_drawn = key
        lines = self.dram_texts()
        widget = self.query_one("#dram", Static)
        text = Text("\n").join(lines)
        if len(lines) != self.dram_rows:
            self.dram_rows = len(lines)
            widget.styles.height = len(lines)
            widget.display = bool(lines)
            widget.update(text)
            self._fit()
        elif widget.content != text:
            widget.update(text, layout=False)
