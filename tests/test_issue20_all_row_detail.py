"""Issue 20, item 3: the detail view of the `all` row shows the machine's top-down, never "not measured"."""

from __future__ import annotations

from helpers.pilot import screen_text

from pmutop.app.screenshots import demo_app
from pmutop.derive import topdown
from pmutop.tui.screens.detail import DetailScreen


async def test_the_all_rows_detail_shows_its_top_down_breakdown_and_history() -> None:
    app, engine, _, _ = demo_app(cpus=64, e_cores=0, model="spr", intervals=10)
    try:
        async with app.run_test(size=(160, 70)) as pilot:
            await pilot.press("end", "enter")
            await pilot.pause()
            screen = app.screen
            assert isinstance(screen, DetailScreen) and screen.cpu == -1
            text = screen_text(app)
            assert "not measured" not in text
            assert "top-down (perf_metrics)" in text
            tma = app.model.total.tma
            assert tma is not None
            for k in topdown.LEVEL1:
                line = next(t for t in text.splitlines() if t.startswith(topdown.LABELS[k]))
                assert line.rstrip().endswith(f"{100 * tma[k]:.1f}%")  # type: ignore[operator]
                assert any(ch in line for ch in "▁▂▃▄▅▆▇█")  # its history
    finally:
        engine.stop()


async def test_a_machine_without_top_down_still_says_so_on_the_all_row() -> None:
    app, engine, _, _ = demo_app(cpus=4, e_cores=0, model="skx", intervals=3)
    try:
        async with app.run_test(size=(160, 70)) as pilot:
            assert not app.model.measures_topdown
            await pilot.press("end", "enter")
            await pilot.pause()
            text = screen_text(app)
            assert "not measured" in text and "on any CPU" in text
    finally:
        engine.stop()
