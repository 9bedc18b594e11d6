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
    cpu = info.cpu_model + (f" ({info.uarch})" if info.uarch else "")
    t = Text()
    t.append("pmutop ", style="bold")
    t.append(f"{info.hostname}  ", style="bold cyan")
    t.append(f"{cpu}  ·  {info.pmu}")
    return t


def status_text(info: RunInfo, feed: SampleFeed, table: CoreTable) -> Text:
    """The backend, interval, run time, sort, filter and the columns that do not fit."""
    elapsed = feed.elapsed()
    arrow = "▼" if table.reverse else "▲"
    t = Text()
    t.append(f"{info.backend}/{info.read_method}", style="bold")
    t.append(f"  ·  interval {fmt.interval_text(feed.interval)}  ·  {fmt.duration(elapsed)}")
    t.append(f"  ·  sort {table.sort_title()} {arrow}")
    if table.row_filter is not None:
        shown = len(table.shown_rows) - 1
        t.append(f"  ·  filter {table.row_filter.text}: {shown}/{len(table.model.cores)}", style="bold yellow")
    if table.dropped:
        t.append(f"  ·  +{table.dropped} columns (c)", style="dim")
    return t


def banner_text(info: RunInfo, model: ViewModel, paused: bool) -> Text:
    t = Text()

    def badge(text: str, style: str) -> None:
        t.append(f" {text} ", style=style)
        t.append(" ")

    if info.replay:
        badge(f"REPLAY of {info.replay}", "bold white on blue")
    if info.simulated:
        badge("SIMULATED PMU: synthetic numbers", "bold black on yellow")
    if paused:
        badge("PAUSED", "bold black on cyan")
    if info.hardware_problem:
        badge("no hardware events: IPC and cache columns unavailable (pmutop info says why)", "bold white on red")
    if info.hypervisor:
        # Say what is true: a VM either passes a virtual PMU through or has no hardware counters at all.
        what = (
            "no hardware counters (kernel software events only)"
            if info.hardware_problem
            else "counters are virtualised"
        )
        badge(f"VM: {what}", "black on magenta")
    if info.watchdog_paused:
        badge("NMI watchdog paused for this run", "black on bright_blue")
    if model.overflow_count:
        badge(f"{model.overflow_count} counter overflows", "black on green")
    if model.total.suspect_count:
        badge(f"{model.total.suspect_count} suspect samples", "bold white on red")
    failed = sum(1 for c in model.cores.values() if c.error)
    if failed:
        badge(f"{failed} cores failed", "bold white on red")
    return t


def add_lost_hosts(banner: Text, lost: list[str]) -> None:
    """A red badge per remote host that does not answer now."""
    for line in lost:
        banner.append(f" {line} ", style="bold white on red")
        banner.append(" ")
