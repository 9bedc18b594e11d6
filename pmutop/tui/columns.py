"""The main table's columns: what each shows, how wide it is, and which go first when space runs out."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rich.text import Text

from pmutop.tui import format as F
from pmutop.tui.model import CoreState, ViewModel

CELL_PADDING = 1  # DataTable's default: one space either side


@dataclass(frozen=True)
class Column:
    key: str
    title: str
    min_width: int
    max_width: int
    priority: int  # 0 is never dropped; higher numbers are dropped first on narrow screens
    sort_value: Callable[[CoreState], float] | None  # None: not sortable
    justify: str = "right"


def _metric(name: str) -> Callable[[CoreState], float]:
    def value(core: CoreState) -> float:
        v = getattr(core.metrics, name) if core.metrics is not None else None
        return float("-inf") if v is None else v

    return value


COLUMNS: tuple[Column, ...] = (
    Column("cpu", "CPU", 6, 6, 0, lambda c: c.cpu, justify="left"),
    Column("util", "Util%", 6, 6, 1, _metric("util")),
    Column("ghz", "GHz", 5, 5, 2, _metric("ghz")),
    Column("ipc", "IPC", 5, 5, 0, _metric("ipc")),
    Column("ipc_hist", "IPC history", 10, 30, 3, None, justify="left"),
    Column("llc_per_s", "LLC miss/s", 11, 11, 1, _metric("llc_misses_per_s")),
    Column("mpki", "MPKI", 6, 6, 2, _metric("llc_mpki")),
    Column("llc_ratio", "LLC miss%", 10, 10, 5, _metric("llc_miss_ratio")),
    Column("llc_hist", "LLC miss/s history", 10, 30, 6, None, justify="left"),
    Column("br_ratio", "Br miss%", 9, 9, 5, _metric("branch_miss_ratio")),
    Column("task", "Top task", 12, 28, 4, None, justify="left"),
)
BY_KEY = {c.key: c for c in COLUMNS}
# The exact formula behind each derived column, as displayed (percent columns are ratios × 100).
COLUMN_FORMULAS: dict[str, str] = {
    "util": "100 × ref_cycles / tsc",
    "ghz": "cycles / ref_cycles × TSC Hz / 1e9",
    "ipc": "instructions / cycles",
    "llc_per_s": "llc_misses / interval seconds",
    "mpki": "1000 × llc_misses / instructions",
    "llc_ratio": "100 × llc_misses / llc_references",
    "br_ratio": "100 × branch_misses / branches",
}
SORTABLE = tuple(c.key for c in COLUMNS if c.sort_value is not None)
FLEXIBLE = ("ipc_hist", "llc_hist", "task")


def layout(width: int) -> dict[str, int]:
    """Columns that fit in `width` cells (in display order) and the width each gets."""
    chosen: set[str] = set()
    used = 0
    for col in sorted(COLUMNS, key=lambda c: c.priority):
        need = col.min_width + 2 * CELL_PADDING
        if used + need <= width or col.priority == 0:
            chosen.add(col.key)
            used += need
    widths = {c.key: c.min_width for c in COLUMNS if c.key in chosen}
    spare = max(0, width - used)
    for key in FLEXIBLE:  # leftover space widens the sparklines and the task name
        if key in widths:
            extra = min(spare, BY_KEY[key].max_width - widths[key])
            widths[key] += extra
            spare -= extra
    return {c.key: widths[c.key] for c in COLUMNS if c.key in widths}


def render_cell(key: str, core: CoreState, model: ViewModel, width: int) -> Text:
    """The text of one cell. A failed core shows its state instead of numbers; a suspect sample '?'."""
    m = core.metrics
    if key == "cpu":
        label = "all" if core.cpu < 0 else core.label
        return Text(label.ljust(width), style="bold" if core.cpu < 0 else "")
    if core.error is not None:
        return Text("failed".rjust(width) if key == "util" else "".rjust(width), style="bold red reverse")
    if key == "task":
        if core.cpu < 0 or core.task is None:
            return Text("".ljust(width))
        t = core.task
        pid = str(t.pid)
        name = t.name[: max(1, width - len(pid) - 1)]
        return Text(f"{name} {pid}"[:width].ljust(width), style="dim")
    if key == "ipc_hist":
        top = F.nice_ceiling(model.series_top("ipc", core), 4.0)
        return Text(F.sparkline(core.history["ipc"], width, top), style="cyan")
    if key == "llc_hist":
        top = F.nice_ceiling(model.series_top("llc_misses_per_s", core), 1e6)
        return Text(F.sparkline(core.history["llc_misses_per_s"], width, top), style="magenta")
    if m is None:
        text = "?" if core.suspect_count and core.latest is not None else F.MISSING
        return Text(text.rjust(width), style="yellow" if text == "?" else "dim")
    if key == "util":
        return F.styled(F.fixed(m.util, ".1f", width, 100), F.util_style(m.util))
    if key == "ghz":
        return F.styled(F.fixed(m.ghz, ".2f", width), None)
    if key == "ipc":
        return F.styled(F.fixed(m.ipc, ".2f", width), F.ipc_style(m.ipc))
    if key == "llc_per_s":
        return F.styled(F.si(m.llc_misses_per_s, width), None)
    if key == "mpki":
        return F.styled(F.fixed(m.llc_mpki, ".2f", width), F.mpki_style(m.llc_mpki))
    if key == "llc_ratio":
        return F.styled(F.fixed(m.llc_miss_ratio, ".1f", width, 100), F.miss_ratio_style(m.llc_miss_ratio))
    if key == "br_ratio":
        return F.styled(F.fixed(m.branch_miss_ratio, ".2f", width, 100), F.branch_style(m.branch_miss_ratio))
    raise KeyError(key)
