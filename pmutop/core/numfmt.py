"""Numbers as people read them, shared by the live view and batch tables so both print one style."""

from __future__ import annotations

from collections.abc import Callable

MISSING = "-"
_UNITS = (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3))


def si(value: float | None, width: int = 6) -> str:
    """1234567 -> '1.2M', right-aligned to `width`. One style per magnitude: a value that rounds up to
    the next unit takes it (999.96M -> '1.0G', never '1000M' beside '1.0G')."""
    if value is None:
        return MISSING.rjust(width)
    mag = abs(value)
    for unit, div in _UNITS:
        # From the value that would round to 1000 of the unit below (999.96M is 1.0G).
        if mag >= div * 0.9995:
            scaled = value / div
            text = f"{scaled:.1f}" if abs(scaled) < 99.95 else f"{scaled:.0f}"
            return f"{text}{unit}".rjust(width)
    return f"{value:.0f}".rjust(width)


def fixed(value: float | None, spec: str, width: int, scale: float = 1.0) -> str:
    """A fixed-point value (percent columns pass scale=100), '-' when absent."""
    return MISSING.rjust(width) if value is None else format(value * scale, spec).rjust(width)


def fixed_cell(spec: str, scale: float = 1.0) -> Callable[[float | None, int], str]:
    """fixed() with its spec and scale bound, for a table column: one call a cell, not two."""

    def cell(value: float | None, width: int) -> str:
        return MISSING.rjust(width) if value is None else format(value * scale, spec).rjust(width)

    return cell
