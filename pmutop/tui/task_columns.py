"""The process and cgroup tables' columns: what each shows of a TaskReading or CgroupReading, how wide it is,
which go first when space runs out, and the colours (the per-core table's thresholds)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from rich.text import Text

from pmutop.core.cpulist import format_cpu_list
from pmutop.core.task_reading import ESTIMATED, CgroupReading, TaskReading, TaskSnapshot
from pmutop.tui import format as fmt

Reading = TaskReading | CgroupReading
SOFTWARE_EVENTS = frozenset({"task_clock", "context_switches"})  # the kernel's own: never an estimate
EST = " est."  # marks every estimated value's column (msr backend: a share of the cores' counts)


@dataclass(frozen=True)
class TaskColumn:
    key: str
    title: str
    width: int
    priority: int  # 0: never dropped; higher numbers are dropped first on narrow screens
    needs: tuple[str, ...] = ()  # events the value is made of (shown only when all are counted)
    justify: str = "right"


def per_second(counts: dict[str, int], key: str, interval: float) -> float | None:
    return counts[key] / interval if key in counts and interval > 0 else None


def ratio(counts: dict[str, int], num: str, den: str, scale: float = 1.0) -> float | None:
    return scale * counts[num] / counts[den] if num in counts and counts.get(den) else None


def values(r: Reading) -> dict[str, float | None]:
    """The derived values of one reading, in the units shown (percent columns in percent)."""
    c, t = r.counts, r.interval
    return {
        "cpu": 100 * c["task_clock"] / (1e9 * t) if "task_clock" in c and t > 0 else None,  # % of one CPU, as top
        "ghz": ratio(c, "cycles", "task_clock"),  # cycles per ns of running time
        "ipc": ratio(c, "instructions", "cycles"),
        "llc": per_second(c, "llc_misses", t),
        "mpki": ratio(c, "llc_misses", "instructions", 1000),
        "brmiss": ratio(c, "branch_misses", "branches", 100),
        "brs": per_second(c, "branch_misses", t),
        "csw": per_second(c, "context_switches", t),
        "counted": None if r.no_permission or not c else 100 * r.counted,
        "procs": float(r.processes) if isinstance(r, CgroupReading) else None,
        "threads": float(r.threads) if isinstance(r, TaskReading) else None,
    }


METRICS = (
    TaskColumn("cpu", "CPU%", 6, 0, ("task_clock",)),
    TaskColumn("ghz", "GHz", 5, 3, ("cycles", "task_clock")),
    TaskColumn("ipc", "IPC", 5, 1, ("instructions", "cycles")),
    TaskColumn("llc", "LLC/s", 6, 2, ("llc_misses",)),
    TaskColumn("mpki", "MPKI", 6, 2, ("llc_misses", "instructions")),
    TaskColumn("brmiss", "BrMiss%", 7, 4, ("branch_misses", "branches")),
    TaskColumn("brs", "BrMiss/s", 8, 4, ("branch_misses",)),  # only where branches are not counted
    TaskColumn("csw", "CSw/s", 6, 5, ("context_switches",)),
)
PROCESS_COLUMNS = (
    TaskColumn("pid", "PID", 7, 0, justify="left"),
    TaskColumn("user", "User", 9, 6, justify="left"),
    TaskColumn("name", "Command", 16, 0, justify="left"),
    *METRICS,
    TaskColumn("cpus", "CPUs", 9, 6, justify="left"),
    TaskColumn("counted", "Counted", 7, 5),
)
CGROUP_COLUMNS = (
    TaskColumn("name", "Cgroup", 24, 0, justify="left"),
    TaskColumn("procs", "Procs", 5, 4),
    *METRICS,
    TaskColumn("counted", "Counted", 7, 5),
)
SORT_FIRST = "cpu"  # a new view sorts by CPU use, busiest first (top's default)
FLEXIBLE = "name"  # spare width goes to the command (or the cgroup's name)
FORMULAS = {
    "cpu": "100 × task_clock / interval (% of one CPU: 200 is two busy threads)",
    "ghz": "cycles / task_clock",
    "ipc": "instructions / cycles",
    "llc": "llc_misses / interval seconds",
    "mpki": "1000 × llc_misses / instructions",
    "brmiss": "100 × branch_misses / branches",
    "counted": "100 × time counted / time enabled (multiplexing, late attachment)",
}


def columns_for(all_columns: Iterable[TaskColumn], events: Iterable[str]) -> tuple[TaskColumn, ...]:
    """The columns whose events are counted; branch misses per second only where branches are not."""
    counted = set(events)
    out = tuple(c for c in all_columns if set(c.needs) <= counted)
    if any(c.key == "brmiss" for c in out):
        out = tuple(c for c in out if c.key != "brs")
    return out


def estimated_mode(snapshot: TaskSnapshot | None) -> bool:
    """The numbers are the msr backend's split of the cores' counts, not the processes' own counters."""
    if snapshot is None:
        return False
    return (
        snapshot.mode == ESTIMATED
        or any(r.estimate for r in snapshot.tasks)
        or any(c.estimate for c in snapshot.cgroups)
    )


def is_estimated(column: TaskColumn) -> bool:
    """A column made of hardware counts: a share of the cores' counts in estimated mode."""
    return bool(column.needs) and not set(column.needs) <= SOFTWARE_EVENTS


def title_of(column: TaskColumn, estimated: bool) -> str:
    return column.title + (EST if estimated and is_estimated(column) else "")


def layout(width: int, columns: tuple[TaskColumn, ...], estimated: bool) -> dict[str, int]:
    """Columns that fit `width` cells (in display order) and their widths; the spare goes to the name."""
    chosen: set[str] = set()
    used = 0
    wanted = {c.key: max(c.width, len(title_of(c, estimated))) for c in columns}
    for col in sorted(columns, key=lambda c: c.priority):
        need = wanted[col.key] + 2
        if used + need <= width or col.priority == 0:
            chosen.add(col.key)
            used += need
    widths = {c.key: wanted[c.key] for c in columns if c.key in chosen}
    if FLEXIBLE in widths:
        widths[FLEXIBLE] += min(max(0, width - used), 24)
    return widths


def sort_value(key: str, r: Reading) -> float | str:
    """What a column sorts by: the number (missing last), or the text of the text columns."""
    if key == "pid" and isinstance(r, TaskReading):
        return float(r.pid)
    if key in ("user", "name"):
        return (r.user if key == "user" and isinstance(r, TaskReading) else name_of(r)).lower()
    if key == "cpus":
        return float(min(r.cpus)) if isinstance(r, TaskReading) and r.cpus else float("inf")
    v = values(r).get(key)
    return float("-inf") if v is None else v


def name_of(r: Reading) -> str:
    return r.comm if isinstance(r, TaskReading) else r.name


def _fixed(v: float | None, spec: str, width: int) -> str:
    return fmt.MISSING.rjust(width) if v is None else format(v, spec).rjust(width)


STYLES: dict[str, Callable[[float | None], str | None]] = {
    "ipc": fmt.ipc_style,
    "mpki": fmt.mpki_style,
    # The per-core table's ratio styles take fractions: these values are in percent.
    "brmiss": lambda v: fmt.branch_style(None if v is None else v / 100),
    "counted": lambda v: None if v is None or v >= 99.5 else "yellow" if v >= 50 else "bold red",
}


def render(key: str, r: Reading, width: int, indent: int = 0) -> Text:
    """One cell. An exited row is dim; a row pmutop may not count says so once, in its name cell."""
    text = _render(key, r, width, indent)
    if isinstance(r, TaskReading) and r.exited:
        text.stylize("dim")
    return text


def _render(key: str, r: Reading, width: int, indent: int) -> Text:
    if key == "pid":
        return Text(str(r.pid).ljust(width) if isinstance(r, TaskReading) else "".ljust(width))
    if key == "user":
        return Text((r.user if isinstance(r, TaskReading) else "")[:width].ljust(width))
    if key == "name":
        return _name(r, width, indent)
    if key == "cpus":
        cpus = format_cpu_list(list(r.cpus)) if isinstance(r, TaskReading) and r.cpus else ""
        return Text((cpus if len(cpus) <= width else cpus[: width - 1] + "…").ljust(width), style="dim")
    if r.no_permission or not r.counts:
        return Text("".rjust(width))
    v = values(r).get(key)
    spec = {"cpu": ".1f", "ghz": ".2f", "ipc": ".2f", "mpki": ".2f", "brmiss": ".2f", "counted": ".0f"}.get(key)
    text = _fixed(v, spec, width) if spec else fmt.MISSING.rjust(width) if v is None else fmt.si(v, width)
    style = STYLES.get(key, lambda _: None)(v)
    column = next((c for c in METRICS if c.key == key), None)
    # A multiplexed input (counted part of the time, scaled up): "~" as the per-core table marks it.
    if column is not None and any(k in r.estimated for k in column.needs):
        stripped = text.lstrip()
        text = " " * max(0, len(text) - len(stripped) - 1) + "~" + stripped
    return Text(text, style=style or "")


def _name(r: Reading, width: int, indent: int) -> Text:
    if isinstance(r, TaskReading):
        name = f"{r.comm} ({r.threads})"
        tail = " exited" if r.exited else " no permission" if r.no_permission else ""
    else:
        name = "  " * indent + r.name
        tail = " no permission" if r.no_permission else ""
    room = max(1, width - len(tail))
    if len(name) > room:
        name = name[: room - 1] + "…"  # say that it was cut
    text = Text(name)
    if tail:
        text.append(tail, style="yellow" if r.no_permission else "")
    text.pad_right(max(0, width - len(text)))
    return text
