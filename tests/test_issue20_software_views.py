"""Issue 20, item 9 (live view): a run without hardware counters (a VM: the kernel's software events only)
opens the heatmap on something it measures, `m` offers only what is measured (ctx switches, migrations,
faults included), and the banner's reason stays whole at 80 and 120 columns."""

from __future__ import annotations

import pytest
from rich.color import Color
from textual.widgets import OptionList

from pmutop.app.screenshots import demo_app, software_app
from pmutop.tui.heatmap import RAMP
from pmutop.tui.screens.heatmap import HeatmapScreen
from pmutop.tui.screens.pickers import ChoiceScreen
from tests.test_issue20_footer_size import screen_text


def coloured_rows(app) -> dict[str, int]:  # type: ignore[no-untyped-def]
    """Heatmap row label -> how many cells carry a colour of the ramp (a value; "·" is no sample)."""
    ramp = {Color.parse(c).triplet for c in RAMP}
    out = {}
    for strip in app.screen._compositor.render_strips():
        text = "".join(seg.text for seg in strip)
        label = text.split(maxsplit=1)[0] if text.strip() else ""
        out[label] = sum(
            len(seg.text) for seg in strip if seg.style and seg.style.bgcolor and seg.style.bgcolor.triplet in ramp
        )
    return out


def offered(app) -> list[str]:  # type: ignore[no-untyped-def]
    options = app.screen.query_one(OptionList)
    return [str(options.get_option_at_index(i).id) for i in range(options.option_count)]


async def test_3_opens_the_heatmap_on_a_measured_metric_with_values() -> None:
    app, _ = software_app(cpus=4, intervals=20)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("3")
        await pilot.pause()
        assert isinstance(app.screen, HeatmapScreen)
        assert app.screen.metric.key == "util"
        coloured = coloured_rows(app)
        assert all(coloured[row] >= 20 for row in ("0", "1", "2", "3", "all")), coloured


@pytest.mark.parametrize("keys", [("m",), ("3", "m")])
async def test_m_offers_only_what_the_run_measures(keys: tuple[str, ...]) -> None:
    app, _ = software_app(cpus=4, intervals=20)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press(*keys)
        await pilot.pause()
        assert isinstance(app.screen, ChoiceScreen)
        choices = offered(app)
        assert choices == ["util", "ev:context_switches", "ev:cpu_migrations", "ev:page_faults"]
        options = app.screen.query_one(OptionList)
        options.highlighted = choices.index("ev:context_switches")
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, HeatmapScreen) and app.screen.metric.key == "ev:context_switches"
        text = screen_text(app)
        assert "Heatmap: Ctx sw/s" in text
        assert coloured_rows(app)["0"] >= 20  # values, not "no sample"


async def test_a_saved_metric_this_run_does_not_measure_is_not_shown() -> None:
    app, _ = software_app(cpus=4, intervals=20)
    app.settings.heatmap_metric = "ipc"
    app.settings.view = "heatmap"
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, HeatmapScreen) and app.screen.metric.key == "util"


async def test_the_demo_still_offers_its_counters_and_top_down() -> None:
    app, engine, _, _ = demo_app(intervals=5, model="adl")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("m")
        await pilot.pause()
        choices = offered(app)
        assert choices[:4] == ["ipc", "util", "ghz", "llc_misses_per_s"] and "tma_retiring" in choices
        await pilot.press("escape", "3")
        await pilot.pause()
        assert app.screen.metric.key == "ipc"  # type: ignore[attr-defined]
    engine.stop()


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_the_vm_reason_is_whole_on_the_banner(size: tuple[int, int]) -> None:
    app, _ = software_app(cpus=4, intervals=5)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        banner = screen_text(app).splitlines()[2]
        assert "SIMULATED" in banner
        assert "VM" in banner and "no hardware counters" in banner and "pmutop info" in banner, banner
        assert "…" not in banner
