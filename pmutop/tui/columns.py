"""The main table's columns: what each shows, how wide it is, and which go first when space runs out."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from rich.text import Text

from pmutop.derive.records import rate_title
from pmutop.derive.titles import NEEDS, TITLES, rate_events
from pmutop.tui import format as fmt
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
    needs: tuple[str, ...] = ()  # event keys the column is computed from (shown only when all are counted)
    event: str | None = None  # an extra event's rate column


def _metric(name: str) -> Callable[[CoreState], float]:
    def value(core: CoreState) -> float:
        v = getattr(core.metrics, name) if core.metrics is not None else None
        return float("-inf") if v is None else v

    return value


def _rate(key: str) -> Callable[[CoreState], float]:
    def value(core: CoreState) -> float:
        s = core.latest
        if s is None or core.metrics is None or key not in s.counts or not s.interval:
            return float("-inf")
        return s.counts[key] / s.interval

    return value


COLUMNS: tuple[Column, ...] = (
    Column("cpu", TITLES["cpu"], 6, 6, 0, lambda c: c.cpu, justify="left"),
    Column("util", TITLES["util"], 6, 6, 1, _metric("util"), needs=()),
    Column("ghz", TITLES["ghz"], 5, 5, 2, _metric("ghz"), needs=NEEDS["ghz"]),
    Column("ipc", TITLES["ipc"], 5, 5, 0, _metric("ipc"), needs=NEEDS["ipc"]),
    Column("ipc_hist", TITLES["ipc_hist"], 10, 60, 3, None, justify="left", needs=NEEDS["ipc_hist"]),
    Column("llc_per_s", TITLES["llc_per_s"], 11, 11, 1, _metric("llc_misses_per_s"), needs=NEEDS["llc_per_s"]),
    Column("mpki", TITLES["mpki"], 6, 6, 2, _metric("llc_mpki"), needs=NEEDS["mpki"]),
    Column("llc_ratio", TITLES["llc_ratio"], 10, 10, 5, _metric("llc_miss_ratio"), needs=NEEDS["llc_ratio"]),
    Column("llc_hist", TITLES["llc_hist"], 10, 60, 6, None, justify="left", needs=NEEDS["llc_hist"]),
    Column("br_ratio", TITLES["br_ratio"], 9, 9, 5, _metric("branch_miss_ratio"), needs=NEEDS["br_ratio"]),
    Column("task", TITLES["task"], 12, 40, 4, None, justify="left"),
)


def _latest(key: str) -> Callable[[CoreState], float]:
    def value(core: CoreState) -> float:
        h = core.history.get(key)
        v = h[-1] if h else None
        return float("-inf") if v is None else v

    return value


# Beside the counters (pmutop.probes.power): shown for the fields some source measures (`power`).
POWER_COLUMNS: tuple[Column, ...] = (
    # Dropped before the task name on narrow screens: Util% and GHz already tell most of it.
    Column("busy", TITLES["busy"], 6, 6, 5, _latest("busy")),
    Column("bzy_mhz", TITLES["bzy_mhz"], 6, 6, 7, _latest("bzy_mhz")),
    Column("temp_c", TITLES["temp_c"], 4, 4, 6, _latest("temp_c")),
    Column("pkg_watts", TITLES["pkg_watts"], 6, 6, 7, _latest("pkg_watts")),
)
# The rest turbostat shows, offered by `c` (off until chosen there; then dropped first when space runs out):
# Avg MHz (the clock over the whole interval, idle included), what throttles the clock, and each idle
# state's residency.
TURBOSTAT_COLUMNS: tuple[Column, ...] = (
    Column("avg_mhz", "AvgMHz", 6, 6, 8, lambda c: _or_inf(avg_mhz(c))),
    Column("throttle", "Throttle", 9, 16, 8, None, justify="left"),
)
# Beside turbostat's package columns, PCM's memory ones: filled on the package rows (and the all row) of a
# run with a DRAM bandwidth source; a CPU's row has none (the memory controllers are per socket). Dropped
# after the task name on narrow screens: most rows are CPUs, and the header's DRAM line stays.
DRAM_COLUMNS: tuple[Column, ...] = (
    Column("dram_read", "DRAM R", 6, 6, 5, None),
    Column("dram_write", "DRAM W", 6, 6, 5, None),
)
DRAM_KEYS = frozenset(c.key for c in DRAM_COLUMNS)
POWER_KEYS = frozenset(c.key for c in POWER_COLUMNS)
TURBOSTAT_KEYS = frozenset(c.key for c in TURBOSTAT_COLUMNS)
CSTATE_PREFIX = "cs:"  # a C-state residency column's key: "cs:C6"


def off_by_default(key: str) -> bool:
    """turbostat's extra columns wait for `c`: by default the room goes to the sparklines and task names."""
    return key in TURBOSTAT_KEYS or key.startswith(CSTATE_PREFIX)


def _or_inf(v: float | None) -> float:
    return float("-inf") if v is None else v


def avg_mhz(core: CoreState) -> float | None:
    """turbostat's Avg_MHz: Bzy_MHz × Busy% / 100 (the average clock over the interval, idle included)."""
    s = core.latest
    return None if s is None or s.busy is None or s.bzy_mhz is None else s.bzy_mhz * s.busy / 100


def cstate_column(name: str) -> Column:
    def value(core: CoreState) -> float:
        return _or_inf(core.latest.cstates.get(name) if core.latest is not None else None)

    return Column(CSTATE_PREFIX + name, f"{name}%", max(5, len(name) + 2), max(5, len(name) + 2), 8, value)


def columns_for(keys: list[str], power: Iterable[str] = (), dram: bool = False) -> tuple[Column, ...]:
    """The columns a run can fill: standard ones whose events are counted, plus a rate per other event,
    plus the power columns of the fields in `power` (e.g. {"busy", "temp_c"}: what samples carry), plus DRAM
    read and write when a DRAM bandwidth source measures them (`dram`)."""
    measured = set(power)
    powered = [c for c in (*POWER_COLUMNS, *TURBOSTAT_COLUMNS) if c.key in measured]
    powered += [cstate_column(k[len(CSTATE_PREFIX) :]) for k in sorted(measured) if k.startswith(CSTATE_PREFIX)]
    counted = set(keys)
    standard = [c for c in COLUMNS if set(c.needs) <= counted]
    extras = []
    # Every counted event shows somewhere: a rate column for those no shown column is made of (the batch table
    # does the same, pmutop.derive.titles.rate_events).
    for key in rate_events(keys, [c.key for c in standard]):
        title = rate_title(key)
        width = max(9, len(title) + 1)
        extras.append(Column(f"ev:{key}", title, width, width, 3, _rate(key), needs=(key,), event=key))
    task = standard.pop()  # the task name stays last
    return (*standard, *powered, *(DRAM_COLUMNS if dram else ()), *extras, task)


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
    "busy": "100 × ΔMPERF / ΔTSC (turbostat Busy%)",
    "bzy_mhz": "TSC MHz × ΔAPERF / ΔMPERF (turbostat Bzy_MHz)",
    "temp_c": "TjMax − IA32_THERM_STATUS digital readout (or hwmon coretemp/k10temp)",
    "pkg_watts": "Δ package energy (RAPL or powercap) / interval; the all row adds the packages",
    "avg_mhz": "Bzy MHz × Busy% / 100 (turbostat Avg_MHz)",
    "throttle": "IA32_THERM_STATUS log bits: what limits the clock now",
    "dram_read": "bytes/s read from DRAM: memory-controller read counts × 64 / measured interval (package rows)",
    "dram_write": "bytes/s written to DRAM: memory-controller write counts × 64 / measured interval",
}
FLEXIBLE = ("ipc_hist", "llc_hist", "task")
# Which counted events each column depends on: an estimated input makes the cell an estimate ("~").
ESTIMATE_INPUTS = {c.key: c.needs for c in COLUMNS} | {"util": ("ref_cycles",)}


def layout(width: int, columns: tuple[Column, ...] = COLUMNS) -> dict[str, int]:
    """Columns that fit in `width` cells (in display order) and the width each gets."""
    by_key = {c.key: c for c in columns}
    chosen: set[str] = set()
    used = 0
    for col in sorted(columns, key=lambda c: c.priority):
        need = col.min_width + 2 * CELL_PADDING
        if used + need <= width or col.priority == 0:
            chosen.add(col.key)
            used += need
    widths = {c.key: c.min_width for c in columns if c.key in chosen}
    spare = max(0, width - used)
    # Leftover space widens the sparklines and the task name, a cell at a time in turn, so all three grow.
    flexible = [k for k in FLEXIBLE if k in widths]
    while spare and flexible:
        for key in list(flexible):
            if not spare:
                break
            if widths[key] >= by_key[key].max_width:
                flexible.remove(key)
                continue
            widths[key] += 1
            spare -= 1
    return {c.key: widths[c.key] for c in columns if c.key in widths}


Cell = tuple[str, str]  # a cell's text and its style ("": none)


def _styled(text: str, style: str | None) -> Cell:
    return (text, style or "")


def _dram_cell(key: str, core: CoreState, width: int) -> Cell:
    """A package's (or the all row's) DRAM bytes/s: '12.3G'; '≥' first when a counter saturated; blank on a
    CPU's row."""
    dram = core.dram
    if dram is None:
        return (("" if core.cpu >= 0 else fmt.MISSING).rjust(width), "dim")
    value = dram.read_bytes_per_s if key == "dram_read" else dram.write_bytes_per_s
    text = fmt.si(value, 0)
    if dram.saturated and value is not None:
        return (("≥" + text).rjust(width), "bold red")
    return (text.rjust(width), "dim" if value is None else "")


def _estimate_mark(cell: Cell, key: str, core: CoreState) -> Cell:
    """Prefix '~' when an input of this cell was multiplexed or rotated (an estimate)."""
    s = core.latest
    if s is None or not s.estimated:
        return cell
    inputs = (key[3:],) if key.startswith("ev:") else ESTIMATE_INPUTS.get(key, ())
    if not any(k in s.estimated for k in inputs):
        return cell
    plain, style = cell
    stripped = plain.lstrip()
    pad = max(0, len(plain) - len(stripped) - 1)
    return (" " * pad + "~" + stripped, style)


def render_cell(key: str, core: CoreState, model: ViewModel, width: int) -> Text:
    """The text of one cell. A failed core shows its state instead of numbers; a suspect sample '?'."""
    plain, style = cell_parts(key, core, model, width)
    return Text(plain, style=style)


def cell_parts(key: str, core: CoreState, model: ViewModel, width: int) -> Cell:
    """A cell's text and style, without building a Text (the table builds one only for a cell that changed)."""
    return _estimate_mark(_render(key, core, model, width), key, core)


def _render(key: str, core: CoreState, model: ViewModel, width: int) -> Cell:
    m = core.metrics
    if key == "cpu":
        label = "all" if core.cpu == -1 else core.label  # below -1: a package's row ("pkg0")
        return (label.ljust(width), "bold" if core.cpu < 0 else "")
    if key in DRAM_KEYS:
        return _dram_cell(key, core, width)
    if core.error is not None:
        return ("failed".rjust(width) if key == "util" else "".rjust(width), "bold red reverse")
    if key == "task":
        if core.cpu < 0 or core.task is None:
            return ("".ljust(width), "")
        t = core.task
        pid = str(t.pid)
        room = max(1, width - len(pid) - 1)
        name = t.name if len(t.name) <= room else t.name[: room - 1] + "…"  # say that it was cut
        return (f"{name} {pid}"[:width].ljust(width), "dim")
    if key == "ipc_hist":
        top = fmt.nice_ceiling(model.shown_top("ipc", core, width), 4.0)
        return (fmt.sparkline(model.columns_of(core, "ipc", width), width, top), "cyan")
    if key == "llc_hist":
        top = fmt.nice_ceiling(model.shown_top("llc_misses_per_s", core, width), 1e6)
        return (fmt.sparkline(model.columns_of(core, "llc_misses_per_s", width), width, top), "magenta")
    if key == "avg_mhz" or key.startswith(CSTATE_PREFIX):
        s = core.latest
        v = avg_mhz(core) if key == "avg_mhz" else s.cstates.get(key[len(CSTATE_PREFIX) :]) if s else None
        return (fmt.MISSING.rjust(width) if v is None else f"{v:.0f}".rjust(width), "dim" if v is None else "")
    if key == "throttle":
        s = core.latest
        if s is None or "throttle" not in s.power_src:
            return (fmt.MISSING.ljust(width), "dim")
        return (",".join(s.throttle)[:width].ljust(width), "bold red") if s.throttle else ("none".ljust(width), "dim")
    if key in POWER_KEYS:
        h = core.history.get(key)
        v = h[-1] if h else None
        if v is None:
            return (fmt.MISSING.rjust(width), "dim")
        return (f"{v:.0f}".rjust(width) if key != "pkg_watts" else f"{v:.1f}".rjust(width), "")
    if m is None:
        text = "?" if core.suspect_count and core.latest is not None else fmt.MISSING
        return (text.rjust(width), "yellow" if text == "?" else "dim")
    if key == "util":
        return _styled(fmt.fixed(m.util, ".1f", width, 100), fmt.util_style(m.util))
    if key == "ghz":
        return _styled(fmt.fixed(m.ghz, ".2f", width), None)
    if key == "ipc":
        return _styled(fmt.fixed(m.ipc, ".2f", width), fmt.ipc_style(m.ipc))
    if key == "llc_per_s":
        return _styled(fmt.si(m.llc_misses_per_s, width), None)
    if key == "mpki":
        return _styled(fmt.fixed(m.llc_mpki, ".2f", width), fmt.mpki_style(m.llc_mpki))
    if key == "llc_ratio":
        return _styled(fmt.fixed(m.llc_miss_ratio, ".1f", width, 100), fmt.miss_ratio_style(m.llc_miss_ratio))
    if key == "br_ratio":
        return _styled(fmt.fixed(m.branch_miss_ratio, ".2f", width, 100), fmt.branch_style(m.branch_miss_ratio))
    if key.startswith("ev:"):
        s = core.latest
        name = key[3:]
        if s is None or name not in s.counts or not s.interval:
            return (fmt.MISSING.rjust(width), "dim")
        return (fmt.si(s.counts[name] / s.interval, width), "")
    raise KeyError(key)
