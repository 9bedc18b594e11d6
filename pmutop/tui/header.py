"""The live view's header lines: the machine, the run's status, and the banner of badges (replay,
simulated, paused, hardware problems, lost hosts)."""

from __future__ import annotations

from rich.text import Text

from pmutop.core.feed import SampleFeed
from pmutop.core.run_description import RunInfo
from pmutop.tui import format as fmt
from pmutop.tui.model import ViewModel
from pmutop.tui.table_controller import CoreTable


def machine_text(info: RunInfo) -> Text:
    """Host, CPU, microarchitecture, PMU. No program name: the simulated CPU's model already says pmutop,
    and a microarchitecture may carry its own parentheses ("Zen 4 (Genoa)"), so it follows a separator."""
    uarch = f"  ·  {info.uarch}" if info.uarch and info.uarch not in info.cpu_model else ""
    t = Text()
    t.append(f"{info.hostname}  ", style="bold cyan")
    t.append(f"{info.cpu_model}{uarch}  ·  {info.pmu}")
    return t


def replay_mark(title: Text, info: RunInfo) -> None:
    """REPLAY on a view's own title, for the views that have no room for the banner's `REPLAY of ...`."""
    if info.replay:
        title.append("   REPLAY", style="bold white on blue")


def status_text(info: RunInfo, feed: SampleFeed, table: CoreTable, own_cost: str | None = None) -> Text:
    """The backend, interval, run time, sort, filter, the columns that do not fit, and pmutop's own cost
    (`own_cost`, where measured)."""
    elapsed = feed.elapsed()
    arrow = "▼" if table.reverse else "▲"
    t = Text()
    t.append(f"{info.backend}/{info.read_method}", style="bold")
    t.append(f"  ·  interval {fmt.interval_text(feed.interval)}  ·  {fmt.duration(elapsed)}")
    t.append(f"  ·  sort {table.sort_title()} {arrow}")
    if table.row_filter is not None:
        shown, cpus = table.cpu_rows_shown(), len(table.model.cores)
        # The all row sums every CPU, not only the rows the filter shows: say so where the filter is named.
        t.append(f"  ·  filter {table.row_filter.text}: {shown}/{cpus}, all = all {cpus}", style="bold yellow")
    if table.dropped:
        t.append(f"  ·  +{table.dropped} column{'s' if table.dropped > 1 else ''} (c)", style="dim")
    if own_cost:  # last: on a narrow terminal it is what gets cut, never the filter the user typed
        t.append(f"  ·  {own_cost}", style="dim")
    return t


def banner_text(info: RunInfo, model: ViewModel, paused: bool, width: int = 1000) -> Text:
    """The badges, in their short forms when the long ones would not fit `width` (the reason a run
    measures little must stay readable at 80 columns)."""
    badges: list[tuple[str, str, str]] = []  # (long text, short text, style)
    if info.replay:
        badges.append((f"REPLAY of {info.replay}", f"REPLAY of {info.replay}", "bold white on blue"))
    if info.simulated:
        badges.append(("SIMULATED PMU: synthetic numbers", "SIMULATED", "bold black on yellow"))
    if paused:
        badges.append(("PAUSED", "PAUSED", "bold black on cyan"))
    if info.cpu_wide_problem:
        # Why the table has nothing but utilisation, and how to allow more (short: the command in backquotes).
        parts = info.cpu_wide_problem.split("`")
        how = parts[1] if len(parts) > 2 else info.cpu_wide_problem
        long = f"no CPU-wide counters: {info.cpu_wide_problem}"
        badges.append((long, f"no CPU-wide counters: {how}", "bold white on red"))
    # Say what is true: a VM either passes a virtual PMU through or has no hardware counters at all.
    if info.hardware_problem and info.hypervisor:
        long = "VM: no hardware counters, only the kernel's software events (pmutop info says why)"
        badges.append((long, "VM: no hardware counters, software events only (pmutop info)", "bold white on red"))
    elif info.hardware_problem:
        long = "no hardware events: IPC and cache columns unavailable (pmutop info says why)"
        badges.append((long, "no hardware events (pmutop info says why)", "bold white on red"))
    elif info.hypervisor:
        badges.append(("VM: counters are virtualised", "VM: virtual counters", "black on magenta"))
    if info.watchdog_paused:
        badges.append(("NMI watchdog paused for this run", "NMI watchdog paused", "black on bright_blue"))
    if model.overflow_count:
        badges.append(
            (f"{model.overflow_count} counter overflows", f"{model.overflow_count} overflows", "black on green")
        )
    if model.total.suspect_count:
        n = model.total.suspect_count
        badges.append((f"{n} suspect samples", f"{n} suspect", "bold white on red"))
    failed = sum(1 for c in model.cores.values() if c.error)
    if failed:
        cores = "core" if failed == 1 else "cores"
        badges.append((f"{failed} {cores} failed", f"{failed} failed", "bold white on red"))
    padding = 2  # the banner's own
    short = sum(len(long) + 3 for long, _, _ in badges) + padding > width
    t = Text()
    for long, brief, style in badges:
        t.append(f" {brief if short else long} ", style=style)
        t.append(" ")
    return t


def add_lost_hosts(banner: Text, lost: list[str]) -> None:
    """A red badge per remote host that does not answer now."""
    for line in lost:
        banner.append(f" {line} ", style="bold white on red")
        banner.append(" ")
