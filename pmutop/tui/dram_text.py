"""The live view's texts of DRAM bandwidth: the header's line per socket (read, write, a bar against the peak),
the estimate from LLC misses where nothing measures it, and the memory view's channel bars. Pure: tests call
them directly.

Numbers come from pmutop.core.dram_reading: memory-controller counts x 64 bytes over the measured interval.
A saturated (AMD UMC) counter's bytes are a lower bound: shown with "≥", never as a plain value.
"""

from __future__ import annotations

from rich.console import Group as RichGroup
from rich.table import Table as RichTable
from rich.text import Text

from pmutop.core.dram_reading import DramReading, PackageDram, estimate_from_llc_misses
from pmutop.core.numfmt import MISSING, si
from pmutop.core.sample import Sample

EIGHTHS = " ▏▎▍▌▋▊▉█"
BAR_MIN, BAR_MAX = 8, 40
AT_LEAST = "≥"  # a saturated counter: at least this much
LABEL_STYLE = "bold cyan"
ESTIMATE_STYLE = "italic yellow"
PER_SOCKET_LINES = 4  # more sockets than this (or a short terminal): one combined line
TALL = 30  # rows from which each socket gets its own line (below: up to one socket alone)


def rate_text(bytes_per_s: float | None, lower_bound: bool = False) -> str:
    """'12.3 GB/s', '812 MB/s'; '-' when not counted; '≥' first when the counter saturated."""
    if bytes_per_s is None:
        return MISSING
    text = si(bytes_per_s, 0)
    number, unit = (text[:-1], text[-1]) if text[-1:].isalpha() else (text, "")
    return f"{AT_LEAST if lower_bound else ''}{number} {unit}B/s"


def share_style(share: float) -> str:
    """Green well below the peak, yellow from 60%, red from 80% (sustained DRAM bandwidth rarely passes
    80-90% of the theoretical peak: STREAM results on servers)."""
    return "red" if share >= 0.8 else "yellow" if share >= 0.6 else "green"


def bar(fraction: float | None, width: int, style: str | None = None) -> Text:
    """A bar `width` cells wide filled to `fraction` (eighths of a cell), the rest dotted; None: all dotted."""
    width = max(width, 1)
    if fraction is None:
        return Text("·" * width, style="dim")
    eighths = round(min(max(fraction, 0.0), 1.0) * width * 8)
    full, part = divmod(eighths, 8)
    filled = "█" * full + (EIGHTHS[part] if part else "")
    t = Text(filled, style=style or share_style(fraction))
    t.append("·" * (width - len(filled)), style="dim")
    return t


def _share_text(p: PackageDram) -> str:
    share = p.peak_share
    if p.peak_bytes_per_s is None:
        return "peak unknown (--mem-peak GB/s)"
    if share is None:
        return f"of {rate_text(p.peak_bytes_per_s)}"
    return f"{AT_LEAST if p.saturated else ''}{share * 100:.0f}% of {rate_text(p.peak_bytes_per_s)}"


def package_line(p: PackageDram, width: int, badge: str | None = None) -> Text:
    """'DRAM pkg0  R 12.3 GB/s  W 4.1 GB/s  ██████····  17% of 307 GB/s': the bar as wide as `width` leaves;
    without a known peak, no bar (the share is not guessed). `badge`: SIMULATED, where the banner does not
    already say it."""
    t = Text()
    t.append(f"DRAM pkg{p.package}", style=LABEL_STYLE)
    t.append(f"  R {rate_text(p.read_bytes_per_s, p.saturated)}  W {rate_text(p.write_bytes_per_s, p.saturated)}  ")
    share_text = _share_text(p)
    tail = "  lower bound: counter saturated" if p.saturated else ""
    if badge:
        tail += f"  {badge}"
    if p.peak_bytes_per_s is not None:
        room = width - 2 - len(t.plain) - 2 - len(share_text) - len(tail)
        if room < BAR_MIN and tail:  # the bar before the words: "≥" already says lower bound
            room += len(tail)
            tail = f"  {badge}" if badge else ""
            room -= len(tail)
        if room >= BAR_MIN:
            t.append_text(bar(p.peak_share, min(room, BAR_MAX)))
            t.append("  ")
    t.append(share_text, style="bold red" if p.saturated else "")
    if tail:
        t.append(tail, style="bold red" if p.saturated and not badge else "")
        if badge:
            t.stylize("bold black on yellow", len(t) - len(badge), len(t))
    return t


def combined_line(packages: list[PackageDram], badge: str | None = None) -> Text:
    """Every socket on one line: 'DRAM GB/s  pkg0 R 12.3 W 4.1 17%  ·  pkg1 R 9.8 W 2.0 13%' (the line is cut
    where the width ends: its CSS ellipsis)."""
    t = Text()
    t.append("DRAM GB/s", style=LABEL_STYLE)
    for i, p in enumerate(packages):
        at_least = AT_LEAST if p.saturated else ""
        t.append("  ·  " if i else "  ")

        def gbs(v: float | None, at_least: str = at_least) -> str:
            return MISSING if v is None else f"{at_least}{v / 1e9:.1f}"

        t.append(f"pkg{p.package} ", style="bold")
        t.append(f"R {gbs(p.read_bytes_per_s)} W {gbs(p.write_bytes_per_s)} ")
        share = p.peak_share
        if p.peak_bytes_per_s is None:
            t.append("peak ?", style="dim")
        elif share is not None:
            t.append(f"{at_least}{share * 100:.0f}%", style=share_style(share))
    if any(p.peak_bytes_per_s is None for p in packages):
        t.append("  (? peak unknown)", style="dim")
    if badge:
        t.append(f"  {badge}", style="bold black on yellow")
    return t


def dram_lines(packages: list[PackageDram], width: int, height: int, badge: str | None = None) -> list[Text]:
    """One line per socket when the terminal has room (the table's rows come first: at 24 rows, one line),
    else one line for all."""
    if len(packages) == 1 or (len(packages) <= PER_SOCKET_LINES and height >= TALL):
        return [package_line(p, width, badge) for p in packages]
    return [combined_line(packages, badge)] if packages else []


def estimate_line(total: Sample | None) -> Text | None:
    """Where nothing measures DRAM traffic: the cores' LLC misses x 64 over the measured interval, labelled
    `est.` (it misses write-backs and prefetches); None when the samples count no LLC misses."""
    if total is None or "llc_misses" not in total.counts or total.interval <= 0:
        return None
    estimate = estimate_from_llc_misses(total.counts["llc_misses"], total.interval)
    t = Text()
    t.append("DRAM all", style=LABEL_STYLE)
    t.append(f"  {estimate.label} ", style=ESTIMATE_STYLE)
    t.append(f"R {rate_text(estimate.bytes_per_s)}")
    t.append("  est. from LLC misses × 64 (no memory-controller counters here)", style="dim")
    return t


def channel_table(p: PackageDram, width: int = 100) -> RichGroup:
    """A heading, then one row per channel: its PMU, read and write as bars and rates. The bars' scale is the
    channel's share of the package's peak where that is known, else the busiest channel (the heading says)."""
    channels = p.channels
    per_channel_peak = p.peak_bytes_per_s / len(channels) if p.peak_bytes_per_s and channels else None
    biggest = max(
        (v for c in channels for v in (c.read_bytes_per_s, c.write_bytes_per_s) if v is not None), default=0.0
    )
    top = per_channel_peak or biggest or 1.0
    pmu_width = max((len(c.pmu) for c in channels), default=4)
    saturated = any(c.saturated for c in channels)
    bar_width = max(BAR_MIN // 2, min(BAR_MAX, (width - 42 - pmu_width - (10 if saturated else 0)) // 2))
    grid = RichTable.grid(padding=(0, 1))
    for justify in ("left", "left", "left", "right", "left", "right", "left"):
        grid.add_column(justify=justify, no_wrap=True)
    for c in channels:
        grid.add_row(*_channel_cells(c, top, bar_width))
    scale = f"share of {rate_text(per_channel_peak)} a channel" if per_channel_peak else "of the busiest channel"
    heading = Text(f"pkg{p.package} channels: read, write (bars: {scale})", style="bold")
    return RichGroup(heading, grid)


def _channel_cells(c: DramReading, top: float, bar_width: int) -> list[Text | str]:
    read, write = c.read_bytes_per_s, c.write_bytes_per_s
    return [
        f"ch{c.channel}",
        Text(c.pmu, style="dim"),
        bar(None if read is None else read / top, bar_width, "cyan"),
        rate_text(read, c.saturated),
        bar(None if write is None else write / top, bar_width, "magenta"),
        rate_text(write, c.saturated),
        Text("saturated", style="bold red") if c.saturated else "",
    ]
