"""The top-down view: one stacked bar per core (Retiring, Bad speculation, Frontend, Backend), the
percentages and the dominant bottleneck; the `all` row weights cores by their slots. The cells and the bar
are here; the screen is pmutop.tui.screens.topdown."""

from __future__ import annotations

from rich.text import Text

from pmutop.derive import topdown
from pmutop.tui.model import CoreState, ViewModel

# Explicit colours, not ANSI names: the theme maps "red" and "magenta" to one colour. Chosen (after
# Okabe & Ito) to stay four different colours at 256 and 16 colours (bright cyan, bright red, bright
# yellow, bright blue) and for protan-, deutan- and tritanopes (tests/test_issue20_topdown_colours.py).
COLOURS: dict[str, str] = {
    "tma_retiring": "#0FF0C3",
    "tma_bad_speculation": "#E15A1E",
    "tma_frontend_bound": "#F0E13C",
    "tma_backend_bound": "#0F78E1",
}
# Without colour (NO_COLOR) each category is a texture; neighbours differ most.
GLYPHS: dict[str, str] = {
    "tma_retiring": "█",
    "tma_bad_speculation": "░",
    "tma_frontend_bound": "▓",
    "tma_backend_bound": "▒",
}
SHORT = {"tma_retiring": "Ret%", "tma_bad_speculation": "Bad%", "tma_frontend_bound": "FE%", "tma_backend_bound": "BE%"}
FIXED_COLUMNS = {"cpu": 6, **{k: 5 for k in SHORT}, "dominant": 15}
NOT_MEASURED = "not measured on this core (see `pmutop info`)"


def stacked_bar(fractions: dict[str, float | None] | None, width: int, patterns: bool = False) -> Text:
    """Four coloured segments whose lengths add up to `width` (largest remainders get the spare cells);
    `patterns`: each category in its own glyph (no colour to tell them apart)."""
    if not fractions or any(fractions.get(k) is None for k in topdown.LEVEL1):
        return Text("".ljust(width))
    exact = [(fractions[k] or 0.0) * width for k in topdown.LEVEL1]
    cells = [int(x) for x in exact]
    for i in sorted(range(4), key=lambda i: exact[i] - cells[i], reverse=True)[: width - sum(cells)]:
        cells[i] += 1
    bar = Text()
    for k, n in zip(topdown.LEVEL1, cells, strict=True):
        bar.append((GLYPHS[k] if patterns else "█") * n, style=COLOURS[k])
    return bar


def measured_share(model: ViewModel, core_types: dict[int, str]) -> str | None:
    """What the all row's top-down covers when only some CPUs measure it (a hybrid part whose E-cores need
    --topdown): "the 8 P-cores" or "6 of 12 CPUs"; None when it covers every CPU with a sample."""
    sampled = [c for c in model.cores.values() if c.latest is not None and c.error is None]
    measured = [c for c in sampled if c.latest is not None and c.latest.topdown is not None]
    if not measured or len(measured) == len(sampled):
        return None
    kinds = {core_types.get(c.cpu) for c in measured}
    others = {core_types.get(c.cpu) for c in sampled if c not in measured}
    if len(kinds) == 1 and None not in kinds and not kinds & others:
        return f"the {len(measured)} {kinds.pop()}-cores"
    return f"{len(measured)} of {len(sampled)} CPUs"


def legend(patterns: bool = False) -> Text:
    t = Text()
    for k in topdown.LEVEL1:
        t.append((GLYPHS[k] if patterns else "█") * 2, style=COLOURS[k])
        t.append(f" {topdown.LABELS[k]}   ")
    return t


def row_cells(core: CoreState, bar_width: int, patterns: bool = False, why_not: str | None = None) -> list[Text]:
    """The row of one CPU (or the all row); `why_not`: what a core that does not measure top-down says instead
    of NOT_MEASURED (the option that would measure it)."""
    label = Text("all" if core.cpu < 0 else core.label, style="bold" if core.cpu < 0 else "")
    if core.error is not None:
        return [label, Text("failed", style="bold red"), *(Text("") for _ in SHORT), Text("")]
    tma = core.tma
    if tma is None or tma.get("tma_retiring") is None:
        not_measured = f"not measured: {why_not.rsplit(': ', 1)[-1]}" if why_not else NOT_MEASURED
        why = "waiting for a sample" if core.latest is None else not_measured
        if len(why) > bar_width and why == not_measured:  # narrow: the gist, not a cut sentence
            why = "not measured"
        if core.latest is not None and core.latest.topdown is not None:
            why = "idle (no slots this interval)"
        return [label, Text(why[:bar_width], style="dim"), *(Text("") for _ in SHORT), Text("")]
    pct = [Text(f"{100 * (tma[k] or 0.0):5.1f}", style=COLOURS[k]) for k in SHORT]
    return [label, stacked_bar(tma, bar_width, patterns), *pct, Text(topdown.dominant(tma) or "", style="bold")]
