"""What a table redraw costs in-process: FastTable (the live view's tables) with every row changed, headless.

Three figures, CPU ms per frame (the frame's work: replacing the cells, Textual's compositor drawing the
changed lines, and the terminal output built from them; a frame with nothing changed is subtracted):
33 rows x 12 columns at 120x40 (the process view with 32 processes), the same with one row changed (what
a frame costs besides its rows), and 256 rows at 160x50 (a 256-core table: only the rows on screen should
be drawn). Headless Textual builds no terminal output, so the app here renders each update to escape
sequences as a terminal driver would (App._display, private: benchmark only).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from rich.text import Text
from textual.app import App, ComposeResult

from benchmarks.stats import summary
from pmutop.tui.widgets.fast_table import FastTable

COLUMNS = 12


def _cell(row: int, column: int, frame: int) -> Text:
    if column == 0:
        return Text(f"proc-{row:03d}", style="bold" if row % 7 == 0 else "")
    value = (row * 37 + column * 11 + frame * 13) % 1000 / 10
    style = "red" if value > 90 else "dim" if value < 5 else ""
    return Text(f"{value:.1f}", justify="right", style=style)


class _Bench(App[None]):
    def __init__(self, rows: int) -> None:
        super().__init__()
        self.rows = rows

    def compose(self) -> ComposeResult:
        yield FastTable(id="t", cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        table = self.query_one(FastTable)
        for column in range(COLUMNS):
            table.add_column(f"col{column}", key=f"c{column}", width=12 if column == 0 else 8)
        for row in range(self.rows):
            table.add_row(*(_cell(row, column, 0) for column in range(COLUMNS)), key=str(row))
        table.focus()

    def _display(self, screen: Any, renderable: Any) -> None:  # what the terminal driver would be given
        if renderable is not None and hasattr(renderable, "render_segments"):
            renderable.render_segments(self.console)


async def _frames(rows: int, size: tuple[int, int], frames: int, changed: int | None = None) -> tuple[float, float]:
    """CPU ms of a frame with `changed` rows changed (default: every row), and of a frame with nothing
    changed."""
    app = _Bench(rows)
    async with app.run_test(size=size) as pilot:
        table = app.query_one(FastTable)
        for _ in range(3):
            await pilot.pause()
        idle = time.process_time()
        for _ in range(frames):
            await pilot.pause()
        idle = (time.process_time() - idle) / frames
        # The new values are made beforehand: making them is the caller's work, not the table's.
        changes = [
            [
                (str(row), f"c{column}", _cell(row, column, frame))
                for row in range(rows if changed is None else changed)
                for column in range(COLUMNS)
            ]
            for frame in range(1, frames + 1)
        ]
        started = time.process_time()
        for change in changes:
            table.set_cells(change)
            await pilot.pause()
        busy = (time.process_time() - started) / frames
    return 1000 * busy, 1000 * idle


def redraw(frames: int, repeat: int) -> dict[str, Any]:
    """Median CPU ms per frame of `frames` frames, `repeat` runs of each figure."""
    out: dict[str, Any] = {}
    for name, rows, size, changed in (
        ("draw 33 rows x 12 changed (120x40)", 33, (120, 40), None),
        ("draw 1 row of 33 changed (120x40)", 33, (120, 40), 1),
        ("draw 256 rows x 12 changed (160x50)", 256, (160, 50), None),
    ):
        runs = []
        for _ in range(repeat):
            busy, idle = asyncio.run(_frames(rows, size, frames, changed))
            runs.append(busy - idle)
        out[name] = summary(runs, "cpu-ms/frame", frames=frames)
    return out


if __name__ == "__main__":
    for figure, result in redraw(frames=40, repeat=3).items():
        print(f"{figure:<40} {result['median']:8.2f} ms  ({result['min']:.2f}..{result['max']:.2f})")
