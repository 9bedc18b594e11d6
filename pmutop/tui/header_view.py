"""The live view's header: the status line (with pmutop's own cost), the banner and the DRAM lines, redrawn
after each update and by the run clock in between. A part of PmutopApp (a base class), kept apart so the app
module stays about composing and the table."""

from __future__ import annotations

import contextlib
import threading
import time

from rich.text import Text
from textual.css.query import NoMatches
from textual.widgets import Static

from pmutop.core.feed import LostHosts
from pmutop.core.own_cost import OwnCostMeter
from pmutop.tui.dram_view import DramView
from pmutop.tui.header import add_lost_hosts, banner_text, status_text


class HeaderView(DramView):
    own_cost: OwnCostMeter | None
    lost_hosts: LostHosts | None
    _stop: threading.Event
    _header_drawn: float
    _header_stale: bool

    def _tick_clock(self) -> None:
        """The run clock between updates (paused, intervals over 1 s), and a DRAM reading later than its update."""
        if time.monotonic() - self._header_drawn >= 0.9:
            self._refresh_header()
        self.poll_dram()

    def _set_line(self, widget_id: str, text: Text) -> None:
        """Show `text` on a one-line Static: nothing to do when unchanged, no layout pass when changed."""
        widget = self.query_one(widget_id, Static)
        if widget.content != text:
            widget.update(text, layout=False)

    def _status_line(self, status: Text) -> Text:
        """The status line shown: `status`, or more (the replay puts its position, speed and END first)."""
        return status

    def _refresh_header(self) -> None:
        self._header_drawn = time.monotonic()
        if self._stop.is_set():
            return
        self._header_stale = self.table_covered()
        if self._header_stale:
            return
        with contextlib.suppress(NoMatches):  # the 1 s timer fired while the app was closing
            self._draw_header()

    def _draw_header(self) -> None:
        own = self.own_cost.text() if self.own_cost is not None else None
        self._set_line("#status", self._status_line(status_text(self.info, self.feed, self.core_table, own)))
        banner = banner_text(self.info, self.model, self.paused, self.size.width)
        if self.lost_hosts is not None:
            add_lost_hosts(banner, self.lost_hosts.lost())
        self._set_line("#banner", banner)
        self.draw_dram()
        widget = self.query_one("#banner", Static)
        empty = not banner.plain
        if widget.has_class("empty") != empty:
            widget.set_class(empty, "empty")
            self._fit()
