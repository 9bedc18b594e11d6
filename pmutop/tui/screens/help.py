"""The help screen: every key of the live view."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

KEYS_HELP: tuple[tuple[str, str], ...] = (
    ("q, F10, Ctrl+C", "quit (the PMU is restored first)"),
    ("space, p", "pause / resume the display (counting goes on)"),
    ("+ / -", "longer / shorter interval"),
    ("s, >  /  <", "sort by the next / previous column shown"),
    ("F6", "choose the sort column from a list"),
    ("r", "reverse the sort"),
    ("click a header", "sort by that column (again: reverse)"),
    ("/", "filter rows: 0-3,8  P  E  util>50  ipc<1  backend>40"),
    ("/ (views 4, 5)", "filter: pid=1234  user=alice  comm~nginx  cgroup~docker  ipc<1"),
    ("\\", "clear the filter"),
    ("c", "choose the columns shown"),
    ("↑ ↓ PgUp PgDn", "move the highlight (the plots follow it)"),
    ("Home End", "first / last row"),
    ("Enter", "detail view of the highlighted row"),
    ("1", "the per-core table"),
    ("2, t", "top-down view: where each core's issue slots go"),
    ("3", "heatmap: cores down, time across"),
    ("4", "processes: per-process counters (--tasks, --pid)"),
    ("5", "cgroups: per-cgroup counters as a tree (--cgroups)"),
    ("6", "memory: DRAM bandwidth per package and channel"),
    ("m", "choose the heatmap's metric (DRAM read/write too)"),
    ("Esc", "back to the table (from a process: back one view)"),
    ("F1, ?, h", "this help"),
)


def shown_path(path: Path) -> str:
    """`path` with the home directory as ~ (the file the app really uses: $XDG_CONFIG_HOME's when set)."""
    home = Path.home()
    return f"~/{path.relative_to(home)}" if path.is_relative_to(home) else str(path)


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark,h,f1", "dismiss", "Close"),
    ]
    KEYS: ClassVar[tuple[tuple[str, str], ...]] = KEYS_HELP

    def compose(self) -> ComposeResult:
        t = Text()
        t.append("pmutop keys", style="bold")
        t.append("   (Esc, q or ? closes this help)\n\n", style="bold cyan")
        for keys, what in self.KEYS:
            t.append(f"{keys:<18}", style="bold cyan")
            t.append(f"{what}\n")
        t.append("\nColours: red = low IPC / high MPKI / many misses; ? = suspect sample.", style="dim")
        t.append(f"\n{self.settings_note()}", style="dim")
        with VerticalScroll():
            yield Static(t, id="help-text")
            yield from self.more()

    def settings_note(self) -> str:
        saved_in = getattr(self.app, "settings_path", None)  # None: this run keeps no settings (tests, pictures)
        where = f"are kept in\n{shown_path(saved_in)}" if saved_in else "are not saved in this run"
        return f"Settings (sort, columns, interval, view) {where}."

    def more(self) -> ComposeResult:
        """What a subclass shows after the keys (the replay's keys)."""
        yield from ()

    def action_dismiss(self) -> None:  # type: ignore[override]
        self.dismiss(None)
