"""The segments of one table cell as Textual's DataTable draws a one-line Rich Text in it (FastTable's rows).

DataTable renders a cell through Rich: Styled(Padding(text, (0, pad)), pre_style, post_style). For a text
that fits on one line that comes to: the padding in the cell's style; a justified text (left, right,
centre) padded to the inner width with the text's own style, an unjustified one with the cell's style;
spans over the text's style. Rich only, no Textual.
"""

from __future__ import annotations

from collections.abc import Callable

from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.text import Text

Framed = Callable[[Style, "Style | None", Style], Style]  # (pre, a text's style, post) -> the style drawn


def fitting_layout(plain: str, length: int, inner: int, justify: str | None) -> int | None:
    """Cells left of the text, or None when Rich would lay it out otherwise (too wide, several lines, tabs,
    full justification, trailing spaces Rich strips before right/centre justification)."""
    if length > inner or "\n" in plain or "\t" in plain or justify == "full":
        return None
    gap = inner - length
    if justify == "right" or justify == "center":
        if plain[-1:].isspace():
            return None
        return gap if justify == "right" else gap // 2
    return 0


def styled_cell(
    value: Text,
    length: int,
    left: int,
    inner: int,
    pad: int,
    text_style: Style | None,
    styles: tuple[Style, Style, Style],
    framed: Framed,
    console: Console,
) -> list[Segment]:
    """A cell whose text has a style or spans; `styles` is DataTable's (pre, padding, post) for the cell."""
    pre, pad_style, post = styles
    style = framed(pre, text_style, post)
    justify = value.justify
    right_style = pad_style if justify is None or justify == "default" else style
    gap = inner - length
    segments = [Segment(" " * pad, pad_style)] if pad else []
    add = segments.append
    if value.spans:
        if left:
            add(Segment(" " * left, style))
        for text, span_style, _ in value.render(console, end=""):
            if span_style is not None and text_style is not None:
                span_style = text_style + span_style  # the text's style lies under its spans
            elif span_style is None:
                span_style = text_style
            add(Segment(text, framed(pre, span_style, post)))
    elif length or left:
        add(Segment(" " * left + value.plain, style))
    if gap - left:
        add(Segment(" " * (gap - left), right_style))
    if pad:
        add(Segment(" " * pad, pad_style))
    return segments


def cut_cells(segments: list[Segment], start: int, end: int) -> list[Segment]:
    """The cells from `start` to `end` of a cell's segments (a column partly scrolled off the screen)."""
    start = max(0, start)
    return list(Segment.divide(segments, [start, end]))[1] if end > start else []
