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
    """The last `width` values as block characters on a 0..top scale (blank where missing)."""
    n = len(values)
    tail = islice(values, max(0, n - width), n)  # a deque's tail, without copying the whole history
    chars = []
    for v in tail:
        if v is None:
            chars.append(" ")
            continue
        level = 0 if top <= 0 else round(min(max(v / top, 0.0), 1.0) * (len(SPARK) - 1))
        chars.append(SPARK[max(level, 1) if v > 0 else 0])
    return "".join(chars).rjust(width)


def duration(seconds: float) -> str:
    seconds = int(seconds)
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h:d}:{m:02d}:{s:02d}"


def interval_text(seconds: float) -> str:
    return f"{seconds:g} s"
