"""Issue 20, item 8: Help is always reachable from the footer (80x24 included), and the "terminal too
small" line fits whatever the size."""

from __future__ import annotations

import pytest

from pmutop.app.screenshots import demo_app, software_app
from pmutop.tui.screens.too_small import TooSmallScreen


def screen_text(app) -> str:  # type: ignore[no-untyped-def]
    """What the terminal shows now, one line per row."""
    return "\n".join("".join(seg.text for seg in strip) for strip in app.screen._compositor.render_strips())


def footer_line(app) -> str:  # type: ignore[no-untyped-def]
    return screen_text(app).splitlines()[-1]


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (250, 70)])
async def test_the_footer_shows_help_and_columns_at_every_size(size: tuple[int, int]) -> None:
    app, engine, _, _ = demo_app(intervals=3)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        footer = footer_line(app)
        assert "? Help" in footer and "c Columns" in footer and "q Quit" in footer
        assert "+/- Interval" in footer and "+ +Interval" not in footer
    engine.stop()


@pytest.mark.parametrize("keys", [("2",), ("3",), ("down", "enter")])
async def test_every_view_footer_at_80_columns_names_help_once(keys: tuple[str, ...]) -> None:
    app, engine, _, _ = demo_app(intervals=3)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press(*keys)
        await pilot.pause()
        footer = footer_line(app)
        assert footer.count("Help") == 1 and footer.count("Quit") == 1, footer
    engine.stop()


async def test_the_software_only_footer_shows_help_at_80_columns() -> None:
    app, _ = software_app(cpus=4, intervals=5)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert "? Help" in footer_line(app)
        await pilot.press("question_mark")
        await pilot.pause()
        assert "pmutop keys" in screen_text(app)


@pytest.mark.parametrize("size", [(39, 11), (30, 10), (20, 6), (12, 5)])
async def test_the_too_small_message_fits_the_terminal(size: tuple[int, int]) -> None:
    app, engine, _, _ = demo_app(intervals=2)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        await pilot.pause(0.05)
        assert isinstance(app.screen, TooSmallScreen)
        shown = " ".join(screen_text(app).split())
        w, h = size
        assert f"{w}x{h}" in shown and "40x12" in shown and "too small" in shown, shown
    engine.stop()
