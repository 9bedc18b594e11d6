"""The live view over a recording: the same app, plus replay keys ([ ] seek, g go to a time, x speed) and the
replay's position and speed in the status line. Space pauses the replay itself, not only the display."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Static

from pmutop.tui import format as fmt
from pmutop.tui.app import HelpScreen, PmutopApp

SEEK_STEP = 10  # intervals per [ or ]

REPLAY_KEYS_HELP: tuple[tuple[str, str], ...] = (
    ("[ ]", f"replay: back / forward {SEEK_STEP} intervals"),
    ("g", "replay: go to a time (seconds, or m:ss)"),
    ("x", "replay: next speed (1×, 2×, 10×, max)"),
)


def parse_time(text: str) -> float | None:
    """Seconds from "90", "90.5", "1:30" or "1:02:03"; None when it is none of those."""
    try:
        parts = [float(p) for p in text.strip().split(":")]
    except ValueError:
        return None
    if not parts or len(parts) > 3 or any(p < 0 for p in parts):
        return None
    seconds = 0.0
    for p in parts:
        seconds = seconds * 60 + p
    return seconds


class GoToScreen(ModalScreen[float | None]):
    DEFAULT_CSS = """
    GoToScreen { align: center middle; }
    #goto { width: 48; height: auto; border: round $accent; padding: 0 1; background: $panel; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def compose(self) -> ComposeResult:
        with Static(id="goto"):
            yield Label("Go to time (seconds, or m:ss), Enter:")
            yield Input(placeholder="e.g. 90 or 1:30", id="goto-input")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        seconds = parse_time(event.value)
        if seconds is None:
            self.notify(f"not a time: {event.value!r}", severity="warning", timeout=3)
            return
        self.dismiss(seconds)

    def action_cancel(self) -> None:
        self.dismiss(None)


class ReplayHelpScreen(HelpScreen):
    """The live view's help, with the replay keys after it."""

    def compose(self) -> ComposeResult:
        yield from super().compose()
        t = Text()
        for keys, what in REPLAY_KEYS_HELP:
            t.append(f"{keys:<16}", style="bold cyan")
            t.append(f"{what}\n")
        self.call_after_refresh(self._add_replay_keys, t)

    def _add_replay_keys(self, t: Text) -> None:
        self.query_one("#help-text", Static).parent.mount(Static(t, id="replay-help"))  # type: ignore[union-attr]


class ReplayApp(PmutopApp):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("left_square_bracket", "seek(-1)", "-10", show=True),
        Binding("right_square_bracket", "seek(1)", "+10", show=True),
        Binding("g", "goto", "Go to", show=True),
        Binding("x", "speed", "Speed", show=True),
    ]

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("slower", "faster"):
            return False  # a recording's intervals are what they were
        return super().check_action(action, parameters)

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(ReplayHelpScreen())

    def _extend_status(self, t: Text) -> None:
        feed = self.feed
        duration = getattr(feed, "duration", None)
        speed = getattr(feed, "speed", None)
        if duration is not None:
            t.append(f"  ·  at {fmt.duration(feed.elapsed())} of {fmt.duration(duration)}")
        if speed is not None:
            t.append(f"  ·  speed {'max' if speed == 'max' else speed + '×'}", style="bold")
        if getattr(feed, "finished", False):
            t.append("  ·  END", style="bold")

    def action_toggle_pause(self) -> None:
        super().action_toggle_pause()
        set_paused = getattr(self.feed, "set_paused", None)
        if set_paused is not None:
            set_paused(self.paused)

    def _show_now(self) -> None:
        """After a seek: show where the replay is, even while paused."""
        paused = self.paused
        self.paused = False
        self.apply_update(None)
        self.paused = paused
        self._refresh_header()

    def action_seek(self, direction: int) -> None:
        seek = getattr(self.feed, "seek", None)
        if seek is not None:
            seek(direction * SEEK_STEP)
            self._show_now()

    def action_goto(self) -> None:
        if getattr(self.feed, "seek_to", None) is None:
            return

        def done(seconds: float | None) -> None:
            if seconds is not None:
                self.feed.seek_to(seconds)  # type: ignore[attr-defined]
                self._show_now()

        self.push_screen(GoToScreen(), done)

    def action_speed(self) -> None:
        next_speed = getattr(self.feed, "next_speed", None)
        if next_speed is not None:
            speed = next_speed()
            self.notify(f"speed {speed if speed == 'max' else speed + '×'}", timeout=2)
            self._refresh_header()
