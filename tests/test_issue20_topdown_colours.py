"""Issue 20, item 2: the four top-down categories are told apart in every colour depth, by colour-blind
readers, on the highlighted row, and without colour (NO_COLOR: a glyph per category)."""

from __future__ import annotations

import itertools

import pytest
from rich._palettes import EIGHT_BIT_PALETTE, STANDARD_PALETTE
from rich.color import Color, ColorSystem
from textual.widgets import DataTable

from pmutop.app.screenshots import demo_app
from pmutop.derive import topdown
from pmutop.tui.screens.detail import DetailScreen
from pmutop.tui.screens.topdown import TopdownScreen
from pmutop.tui.topdown_view import COLOURS, GLYPHS, legend, stacked_bar

# Machado et al. (2009) colour-vision-deficiency matrices, severity 1, on linear RGB.
CVD = {
    "normal": ((1, 0, 0), (0, 1, 0), (0, 0, 1)),
    "protanopia": ((0.152286, 1.052583, -0.204868), (0.114503, 0.786281, 0.099216), (-0.003882, -0.048116, 1.051998)),
    "deuteranopia": ((0.367322, 0.860646, -0.227968), (0.280085, 0.672501, 0.047413), (-0.01182, 0.04294, 0.968881)),
    "tritanopia": ((1.255528, -0.076749, -0.178779), (-0.078411, 0.930809, 0.147602), (0.004733, 0.691367, 0.3039)),
}


def lab(rgb: tuple[int, int, int], matrix: tuple[tuple[float, ...], ...]) -> tuple[float, float, float]:
    """CIE L*a*b* of `rgb` as a reader with that colour vision sees it."""
    lin = [c / 255 / 12.92 if c / 255 <= 0.04045 else ((c / 255 + 0.055) / 1.055) ** 2.4 for c in rgb]
    r, g, b = (min(max(sum(m * v for m, v in zip(row, lin, strict=True)), 0.0), 1.0) for row in matrix)
    x, y, z = (0.4124 * r + 0.3576 * g + 0.1805 * b, 0.2126 * r + 0.7152 * g + 0.0722 * b,
               0.0193 * r + 0.1192 * g + 0.9505 * b)  # fmt: skip

    def f(t: float) -> float:
        return t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116

    return 116 * f(y) - 16, 500 * (f(x / 0.9505) - f(y)), 200 * (f(y) - f(z / 1.089))


def shown(colour: str, system: ColorSystem | None) -> tuple[int, int, int]:
    """The RGB a terminal of that colour depth shows for `colour` (Textual downgrades as rich does)."""
    c = Color.parse(colour)
    if system is None:
        return tuple(c.get_truecolor())  # type: ignore[return-value]
    number = c.downgrade(system).number
    palette = STANDARD_PALETTE if system == ColorSystem.STANDARD else EIGHT_BIT_PALETTE
    return tuple(palette[number])  # type: ignore[arg-type,index]


@pytest.mark.parametrize("system", [None, ColorSystem.EIGHT_BIT, ColorSystem.STANDARD], ids=["24bit", "256", "16"])
@pytest.mark.parametrize("vision", list(CVD))
def test_the_four_categories_stay_far_apart_in_every_colour_depth_and_colour_vision(
    system: ColorSystem | None, vision: str
) -> None:
    colours = [COLOURS[k] for k in topdown.LEVEL1]
    if system is not None:  # four different terminal colours, not two that happen to be the same
        assert len({Color.parse(c).downgrade(system).number for c in colours}) == 4
    seen = [lab(shown(c, system), CVD[vision]) for c in colours]
    closest = min(
        sum((p - q) ** 2 for p, q in zip(a, b, strict=True)) ** 0.5 for a, b in itertools.combinations(seen, 2)
    )
    assert closest > 25  # CIE76 ΔE: clearly different patches, not shades of one


def test_without_colour_each_category_has_its_own_glyph_in_the_bar_and_the_legend() -> None:
    fractions = {"tma_retiring": 0.25, "tma_bad_speculation": 0.25, "tma_frontend_bound": 0.25,
                 "tma_backend_bound": 0.25}  # fmt: skip
    assert len(set(GLYPHS.values())) == 4
    assert stacked_bar(fractions, 8, patterns=True).plain == "".join(GLYPHS[k] * 2 for k in topdown.LEVEL1)
    assert stacked_bar(fractions, 8).plain == "█" * 8  # in colour, solid blocks
    key = legend(patterns=True).plain
    for k in topdown.LEVEL1:
        assert f"{GLYPHS[k] * 2} {topdown.LABELS[k]}" in key


def bar_colours(app, label: str) -> list[str]:  # type: ignore[no-untyped-def]
    """The colours of the bar's cells on the table line that starts with `label`, left to right, once each."""
    for strip in app.screen._compositor.render_strips():
        if "".join(s.text for s in strip).startswith(f" {label} "):
            colours: list[str] = []
            for seg in strip:
                if seg.style and seg.style.color and seg.text.strip() and set(seg.text) <= set("█▓▒░"):
                    hex_ = seg.style.color.get_truecolor().hex
                    if hex_ not in colours:
                        colours.append(hex_)
            return colours
    raise AssertionError(f"no line starts with {label!r}")


async def test_the_highlighted_row_keeps_its_four_colours() -> None:
    app, engine, _, _ = demo_app(model="adl", intervals=10)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await app.push_screen(TopdownScreen())
            await pilot.pause()
            table = app.screen.query_one("#tma", DataTable)
            assert table.cursor_row == 0
            tma = app.model.cores[0].tma
            assert tma is not None and all((tma[k] or 0) > 0.05 for k in topdown.LEVEL1)  # every part shows
            expected = [Color.parse(COLOURS[k]).get_truecolor().hex for k in topdown.LEVEL1]
            assert bar_colours(app, "0 P") == expected  # highlighted
            await pilot.press("down")
            assert table.cursor_row == 1
            assert bar_colours(app, "0 P") == expected  # and not highlighted
    finally:
        engine.stop()


async def test_no_color_draws_the_bars_in_glyphs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    app, engine, _, _ = demo_app(model="adl", intervals=10)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await app.push_screen(TopdownScreen())
            await pilot.pause()
            text = ["".join(s.text for s in strip) for strip in app.screen._compositor.render_strips()]
            line = next(t for t in text if t.startswith(" 0 P "))
            for k in topdown.LEVEL1:
                assert GLYPHS[k] in line
                assert any(f"{GLYPHS[k] * 2} {topdown.LABELS[k]}" in t for t in text)  # the legend says which
    finally:
        engine.stop()


async def test_the_detail_views_top_down_history_uses_the_same_colours() -> None:
    app, engine, _, _ = demo_app(model="adl", intervals=10)
    try:
        async with app.run_test(size=(160, 70)) as pilot:
            await app.push_screen(DetailScreen(0))
            await pilot.pause()
            colours = {}
            for strip in app.screen._compositor.render_strips():
                text = "".join(s.text for s in strip)
                for k in topdown.LEVEL1:
                    if text.lstrip().startswith(topdown.LABELS[k]):
                        colours[k] = {s.style.color.get_truecolor().hex for s in strip if s.style and s.style.color
                                      and s.text.strip() and set(s.text.strip()) <= set("▁▂▃▄▅▆▇█")}  # fmt: skip
            assert colours == {k: {Color.parse(COLOURS[k]).get_truecolor().hex} for k in topdown.LEVEL1}
    finally:
        engine.stop()
