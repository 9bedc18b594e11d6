"""Cell text for the live view: fixed widths so columns do not jump, and colours that find the sick core."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import islice

from rich.text import Text

from pmutop.core.numfmt import MISSING, fixed, si

__all__ = ["MISSING", "fixed", "si"]  # the shared formatter, re-exported for the view's cells

SPARK = " ▁▂▃▄▅▆▇█"


# Colour thresholds: a style name, or None for the default colour.
def ipc_style(ipc: float | None) -> str | None:
    if ipc is None:
        return None
    if ipc < 0.5:
        return "bold red"
    if ipc < 1.0:
        return "yellow"
    return "green" if ipc >= 2.0 else None


def worse_above(value: float | None, yellow: float, red: float) -> str | None:
    """For metrics where higher is worse (MPKI, miss ratios)."""
    if value is None:
        return None
    return "bold red" if value >= red else "yellow" if value >= yellow else None


def mpki_style(mpki: float | None) -> str | None:
    return worse_above(mpki, 2, 10)


def miss_ratio_style(ratio: float | None) -> str | None:
    return worse_above(ratio, 0.3, 0.6)


def branch_style(ratio: float | None) -> str | None:
    return worse_above(ratio, 0.02, 0.05)


def util_style(util: float | None) -> str | None:
    if util is None:
        return None
    return "bold" if util >= 0.9 else "dim" if util < 0.05 else None


def styled(text: str, style: str | None) -> Text:
    return Text(text, style=style or "")


def nice_ceiling(value: float, floor: float) -> float:
    """A round scale top (1, 2, 5 × 10^n) at least `floor`: a column's sparkline scale."""
    if value <= floor:
        return floor
    magnitude = 10 ** int(f"{value:e}".split("e")[1])
    for step in (1, 2, 5, 10):
        if value <= step * magnitude:
            return float(step * magnitude)
    return float(10 * magnitude)


def sparkline(values: Sequence[float | None], width: int, top: float) -> str:
    """The last `width` values as block characters on a 0..top scale (blank where missing). One expression
    per value: the table draws one for each row on screen every interval."""
    n = len(values)
    tail = islice(values, max(0, n - width), n)  # a deque's tail, without copying the whole history
    if top <= 0:
        chars = [" " if v is None else SPARK[1] if v > 0 else SPARK[0] for v in tail]
    else:  # any value above 0 shows at least the lowest block
        steps = len(SPARK) - 1
        chars = [
            " " if v is None else SPARK[max(round(min(v / top, 1.0) * steps), 1)] if v > 0 else SPARK[0] for v in tail
        ]
    return "".join(chars).rjust(width)


def duration(seconds: float) -> str:
    seconds = int(seconds)
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h:d}:{m:02d}:{s:02d}"


def interval_text(seconds: float) -> str:
    return f"{seconds:g} s"


# -- time axes (the history plots, the heatmap)

TICK_STEPS = (0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 43200, 86400)
MARK = "▲"  # under the column where the interval changed
WAITING = "waiting for the first reading"  # a view opened before the first interval came (a saved view at start)


def seconds_text(seconds: float) -> str:
    """A compact time span for an axis: 0.5s, 45s, 2m30s, 1h05m."""
    s = round(seconds)
    if s < 120:
        return f"{seconds:.0f}s" if abs(seconds - s) < 1e-6 else f"{seconds:.1f}s"
    m, s = divmod(s, 60)
    if m < 60:
        return f"{m}m{s:02d}s" if s else f"{m}m"
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m"


def time_axis(columns: int, step: float, cell: int = 1, marks: Sequence[int] = (), min_gap: int = 12) -> str:
    """The line under `columns` columns of `step` seconds, `cell` characters each: "now" under the newest,
    round times ago ("-30s", "-1m") centred on the column edges they fall on, at least `min_gap` characters
    apart (so plots of one width carry the same labels), and MARK under the `marks` columns."""
    width = columns * cell
    if width < 3:
        return "now"[:width]
    line = [" "] * width
    taken = [False] * width

    def put(text: str, start: int) -> None:
        end = start + len(text)
        if start >= 0 and end <= width and not any(taken[max(start - 1, 0) : end + 1]):
            line[start:end] = text
            taken[start:end] = [True] * len(text)

    for c in marks:
        x = min(max(c, 0), columns - 1) * cell + cell // 2
        line[x], taken[x] = MARK, True
    line[width - 3 :], taken[width - 3 :] = "now", [True] * 3  # "now" wins over a mark
    tick = next((t for t in TICK_STEPS if t / step * cell >= min_gap), None) if step > 0 else None
    k = 1
    while tick is not None and k * tick <= columns * step + 1e-9:
        label = f"-{seconds_text(k * tick)}"
        put(label, round((columns - k * tick / step) * cell) - len(label) // 2)
        k += 1
    return "".join(line)
