"""The live view over a recording: the same app, plus replay keys ([ ] seek, g go to a time, x speed) and the
replay's position and speed in the status line. Space pauses the replay itself, not only the display.

The keys act only on a feed that declares ReplayControls (pmutop.core.feed); on any other feed they do
nothing."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType

from pmutop.core.feed import ReplayControls
from pmutop.tui import format as fmt
from pmutop.tui.app import PmutopApp
from pmutop.tui.screens.help import HelpScreen
from pmutop.tui.screens.replay import SEEK_STEP, GoToScreen, ReplayHelpScreen


class ReplayApp(PmutopApp):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("left_square_bracket", "seek(-1)", "-10", show=True),
        Binding("right_square_bracket", "seek(1)", "+10", show=True),
        Binding("g", "goto", "Go to", show=True),
        Binding("x", "speed", "Speed", show=True),
    ]

    @property
    def replay(self) -> ReplayControls | None:
        feed = self.feed
        return feed if isinstance(feed, ReplayControls) else None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("slower", "faster"):
            return False  # a recording's intervals are what they were
        return super().check_action(action, parameters)

    async def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            await self.push_screen(ReplayHelpScreen())

    def _status_line(self, status: Text) -> Text:
        """The replay's END, its notice (indexing, a damaged or cut-short file), position and speed first,
        so they are whole at 80 columns; the run's status follows as far as it fits."""
        replay = self.replay
        if replay is None:
            return status
        t = Text()
        if replay.finished:
            t.append(" END ", style="bold reverse")
            t.append("  ·  ")
        notice = replay.notice
        if notice:
            t.append(notice, style="bold yellow")
            t.append("  ·  ")
        t.append(f"at {fmt.duration(self.feed.elapsed())} of {fmt.duration(replay.duration)}")
        speed = replay.speed
        t.append(f"  ·  speed {'max' if speed == 'max' else speed + '×'}", style="bold")
        t.append("  ·  ")
        t.append_text(status)
        return t

    def action_toggle_pause(self) -> None:
        super().action_toggle_pause()
        if self.replay is not None:
            self.replay.set_paused(self.paused)

    def _show_now(self) -> None:
        """After a seek: show where the replay is, even while paused."""
        paused = self.paused
        self.paused = False
        self.apply_update(self._lookup_tasks())  # the tasks recorded where the replay is now
        self.paused = paused
        self._refresh_header()

    def action_seek(self, direction: int) -> None:
        if self.replay is not None:
            self.replay.seek(direction * SEEK_STEP)
            self._show_now()

    def action_goto(self) -> None:
        replay = self.replay
        if replay is None:
            return

        def done(seconds: float | None) -> None:
            if seconds is not None:
                replay.seek_to(seconds)
                self._show_now()

        self.push_screen(GoToScreen(), done)

    def action_speed(self) -> None:
        if self.replay is not None:
            speed = self.replay.next_speed()
            self.notify(f"speed {speed if speed == 'max' else speed + '×'}", timeout=2)
            self._refresh_header()
