"""The replay's screens: going to a time, and the help with the replay keys after the live view's."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import Input, Label, Static

from pmutop.tui.screens.base import CancellableModal
from pmutop.tui.screens.help import KEYS_HELP, HelpScreen

SEEK_STEP = 10  # intervals per [ or ]

REPLAY_KEYS_HELP: tuple[tuple[str, str], ...] = (
    ("[ ]", f"replay: back / forward {SEEK_STEP} intervals"),
    ("g", "replay: go to a time (seconds, or m:ss)"),
    ("x", "replay: next speed (1×, 2×, 10×, max)"),
)

LIVE_ONLY_KEYS = frozenset({"+ / -"})  # a recording's intervals are what they were
REPLAY_WORDING = {
    "q, F10, Ctrl+C": "quit",
    "space, p": "pause / resume the replay",
}


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


class GoToScreen(CancellableModal[float | None]):
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


class ReplayHelpScreen(HelpScreen):
    """The replay's keys: the live view's that apply to a recording (no interval keys, and quitting restores
    nothing: a replay never touches the PMU), then the replay's own."""

    KEYS = tuple((keys, REPLAY_WORDING.get(keys, what)) for keys, what in KEYS_HELP if keys not in LIVE_ONLY_KEYS)

    def settings_note(self) -> str:
        return "A replay saves no settings (sort, columns, view)."

    def more(self) -> ComposeResult:
        t = Text()
        t.append("replay keys\n", style="bold")
        for keys, what in REPLAY_KEYS_HELP:
            t.append(f"{keys:<18}", style="bold cyan")
            t.append(f"{what}\n")
        yield Static(t, id="replay-help")
