"""The heatmap view: colour scales, folding many cores into groups, group means, the time axis, and the
screen driven with Pilot over the simulated PMU."""

from __future__ import annotations

import html
import re
from collections import deque
from itertools import pairwise

import pytest
from textual.widgets import OptionList, Static

from pmutop.app.screenshots import SIZE, demo_app, scene
from pmutop.tui.heatmap import (
    METRICS,
    MISSING_CHAR,
    RAMP,
    RAMP_STYLES,
    Scale,
    cells_text,
    fold,
    group_values,
    legend,
    scale_for,
    tail,
    time_axis,
)
from pmutop.tui.model import CoreState
from pmutop.tui.screens.heatmap import HeatmapScreen
from pmutop.tui.widgets.heatmap_rows import HeatmapRows

BY_KEY = {m.key: m for m in METRICS}


def cores(n: int, e_from: int | None = None) -> list[CoreState]:
    kind = (lambda c: None) if e_from is None else (lambda c: "E" if c >= e_from else "P")
    return [CoreState(c, kind(c)) for c in range(n)]


# -- scales and colours


def test_a_linear_scale_maps_its_ends_to_the_ramp_ends_and_clamps() -> None:
    s = Scale(0.0, 4.0)
    assert s.level(0.0) == 0
    assert s.level(4.0) == len(RAMP) - 1
    assert s.level(9.0) == len(RAMP) - 1 and s.level(-1.0) == 0  # clamped, never out of the ramp
    assert s.level(None) is None
    assert s.level(float("nan")) is None
    levels = [s.level(4.0 * i / 100) for i in range(101)]
    assert levels == sorted(levels) and set(levels) == set(range(len(RAMP)))  # monotonic, every step used


def test_each_metric_gets_its_scale_rule() -> None:
    assert scale_for(BY_KEY["ipc"], 2.3) == Scale(0.0, 5.0)  # a round ceiling of the largest value seen
    assert scale_for(BY_KEY["ipc"], 0.2) == Scale(0.0, 1.0)  # an idle machine does not look busy
    assert scale_for(BY_KEY["ghz"], 3.4) == Scale(0.0, 5.0)
    assert scale_for(BY_KEY["util"], 0.3) == Scale(0.0, 1.0)
    for key in ("tma_retiring", "tma_bad_speculation", "tma_frontend_bound", "tma_backend_bound"):
        assert scale_for(BY_KEY[key], 0.4) == Scale(0.0, 1.0)
    llc = scale_for(BY_KEY["llc_misses_per_s"], 3.4e6)
    assert (llc.lo, llc.hi, llc.log) == (1e3, 1e7, True)
    assert llc.fraction(1e6) == pytest.approx(0.75)  # decades, not millions, are even steps
    assert llc.level(10.0) == 0 and llc.level(0.0) == 0
    assert scale_for(BY_KEY["llc_misses_per_s"], 0.0).hi > 0  # no misses yet: still a valid scale


def test_cells_are_background_coloured_and_missing_samples_a_dim_dot() -> None:
    t = cells_text([0.0, None, 1.0], Scale(0.0, 1.0), cell=2)
    assert t.plain == "  " + MISSING_CHAR.center(2) + "  "
    styles = [span.style for span in t.spans]
    assert styles[0] == RAMP_STYLES[0] and styles[2] == RAMP_STYLES[-1]
    assert styles[1].dim  # type: ignore[union-attr]


def test_the_legend_names_the_metric_and_the_scale_ends_with_units() -> None:
    text = legend(BY_KEY["llc_misses_per_s"], scale_for(BY_KEY["llc_misses_per_s"], 3.4e6)).plain
    assert text.startswith("LLC miss/s") and "1.0k/s" in text and "10.0M/s" in text and "(log)" in text
    util = legend(BY_KEY["util"], Scale(0.0, 1.0)).plain
    assert "0%" in util and "100%" in util and "no sample" in util
    assert len(legend(BY_KEY["tma_bad_speculation"], Scale(0.0, 1.0)).plain) < 78  # fits at 80 columns


def test_the_time_axis_puts_round_times_on_their_columns_and_now_under_the_newest() -> None:
    axis = time_axis(60, 1.0)
    assert len(axis) == 60 and axis.endswith("now")
    assert axis.index("-15s") + 2 == 60 - 15 and axis.index("-45s") + 2 == 60 - 45  # centred on their edge
    assert "-2m" in time_axis(60, 10.0) and "-8m" in time_axis(60, 10.0)
    assert len(time_axis(30, 0.5, cell=2)) == 60 and "-5s" in time_axis(30, 0.5, cell=2)
    assert time_axis(5, 1.0) == "  now"  # too narrow for a label: "now" wins


# -- rows and groups


def test_cores_that_fit_get_one_row_each() -> None:
    groups = fold(cores(12, e_from=8), 20)
    assert [g.label for g in groups][:2] == ["0 P", "1 P"] and groups[-1].label == "11 E"
    assert all(len(g.cpus) == 1 for g in groups)


@pytest.mark.parametrize("rows", [1, 5, 19, 30, 65, 511])
def test_512_cores_fold_into_consecutive_groups_that_fit_the_height(rows: int) -> None:
    groups = fold(cores(512), rows)
    assert len(groups) <= rows
    assert [c for g in groups for c in g.cpus] == list(range(512))  # every core once, in order
    for g in groups:
        assert list(g.cpus) == list(range(g.cpus[0], g.cpus[-1] + 1))  # consecutive ranges
        assert g.label == f"{g.cpus[0]}-{g.cpus[-1]}" or len(g.cpus) == 1
    if rows == 19:  # round sizes: 28 CPUs a row
        assert groups[0].label == "0-27" and len(groups) == 19


def test_hybrid_cores_are_grouped_by_type_first() -> None:
    groups = fold(cores(48, e_from=32), 6)
    assert len(groups) <= 6
    assert [g.label for g in groups] == ["0-7 P", "8-15 P", "16-23 P", "24-31 P", "32-39 E", "40-47 E"]
    interleaved = [CoreState(c, "P" if c % 2 == 0 else "E") for c in range(16)]
    groups = fold(interleaved, 2)
    assert [set(g.cpus) for g in groups] == [set(range(0, 16, 2)), set(range(1, 16, 2))]
    assert [g.label for g in groups] == ["0-14~ P", "1-15~ E"]  # not contiguous: marked


def test_group_means_skip_missing_samples_and_align_at_the_newest_point() -> None:
    a = deque([1.0, None, 3.0, 4.0])
    b = deque([3.0, None, None])  # one point shorter (a core that started late or failed)
    assert tail(b, 5) == [None, None, 3.0, None, None]
    means = group_values([a, b], 5)
    assert means == [None, 1.0, 3.0, 3.0, 4.0]
    assert group_values([a], 2) == [3.0, 4.0]
    assert group_values([deque(), deque([None])], 3) == [None, None, None]


# -- the screen


def rows_of(app) -> list[str]:  # type: ignore[no-untyped-def]
    return [line.plain for line in app.screen.query_one(HeatmapRows).lines]


def static(app, widget_id: str) -> str:  # type: ignore[no-untyped-def]
    return str(app.screen.query_one(widget_id, Static).render())


async def test_the_screen_shows_one_row_per_core_coloured_by_the_history() -> None:
    app, engine, _, clock = demo_app(intervals=20, model="spr")
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await app.push_screen(HeatmapScreen())
            await pilot.pause()
            screen = app.screen
            assert isinstance(screen, HeatmapScreen)
            rows = rows_of(app)
            assert len(rows) == len(engine.cpus) + 1
            assert rows[0].startswith("0 P ") and rows[-2].startswith("11 E") and rows[-1].startswith("all")
            assert "SIMULATED" in static(app, "#hm-title") and "per core" in static(app, "#hm-title")
            assert static(app, "#hm-legend").startswith("IPC")
            axis = static(app, "#hm-axis")
            assert "-15s" in axis and axis.rstrip().endswith("now")
            # The newest column of core 0 has the colour of its last IPC on the screen's scale.
            line = screen.query_one(HeatmapRows).lines[0]
            scale = scale_for(BY_KEY["ipc"], app.model.series_top("ipc"))
            last = app.model.cores[0].history["ipc"][-1]
            assert line.spans[-1].style == RAMP_STYLES[scale.level(last)]  # type: ignore[index]
            assert line.plain.count(MISSING_CHAR) == screen.points - 20  # only 20 intervals so far

            assert screen.refresh_from(app.model) == 0  # nothing new: no line repainted
            clock.advance(1.0)
            engine.tick()
            app.model.ingest(engine.rings)
            assert screen.refresh_from(app.model) > 0
            assert rows_of(app)[0].count(MISSING_CHAR) == screen.points - 21

            await pilot.press("m")  # the chooser of what this run measures (issue 20, item 9)
            options = app.screen.query_one(OptionList)
            options.highlighted = 1
            await pilot.press("enter")
            await pilot.pause()
            assert screen.metric.key == "util" and static(app, "#hm-legend").startswith("Util %")
            screen.set_metric("tma_backend_bound")
            assert static(app, "#hm-legend").startswith("Backend bound")
            screen.set_metric("pkg_watts")  # the last of the list (the power metrics follow top-down)
            assert static(app, "#hm-legend").startswith("Package W")
            await pilot.press("m", "escape")
            assert screen.metric.key == "pkg_watts"  # Esc keeps it
            await pilot.press("escape")
            assert not isinstance(app.screen, HeatmapScreen)
    finally:
        engine.stop()


async def test_256_cores_at_80x24_fold_into_groups_and_nothing_overlaps() -> None:
    app, engine, _, _ = demo_app(cpus=256, e_cores=0, model="spr", intervals=3)
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await app.push_screen(HeatmapScreen("llc_misses_per_s"))
            await pilot.pause()
            screen = app.screen
            assert isinstance(screen, HeatmapScreen)
            assert screen.grouped
            rows = rows_of(app)
            widget = screen.query_one(HeatmapRows)
            assert len(rows) <= widget.size.height
            assert rows[0].startswith("0-15 ") and rows[-1].startswith("all")
            assert sum(len(g.cpus) for g in screen.groups) == 256
            assert all(len(r) <= widget.size.width for r in rows)
            title = static(app, "#hm-title")
            assert "groups" in title and "SIMULATED" in title and len(title) <= 78
            regions = [screen.query_one(w).region for w in ("#hm-title", "#hm-legend", "#hm-rows", "#hm-axis")]
            for a, b in pairwise(regions):
                assert a.bottom <= b.y  # stacked, not overlapping
            assert regions[-1].bottom <= 23  # the footer keeps its line
    finally:
        engine.stop()


async def test_resizing_refolds_and_widens_the_cells() -> None:
    app, engine, _, _ = demo_app(cpus=64, e_cores=16, model="spr", intervals=5)
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await app.push_screen(HeatmapScreen())
            await pilot.pause()
            screen = app.screen
            assert isinstance(screen, HeatmapScreen)
            assert screen.grouped and {g.label.split()[-1] for g in screen.groups} == {"P", "E"}
            await pilot.resize_terminal(250, 70)
            await pilot.pause()
            assert not screen.grouped and len(rows_of(app)) == 65
            assert screen.cell == 3 and screen.points == 81  # the whole width, in cells of 3
            assert all(len(r) <= screen.query_one(HeatmapRows).size.width for r in rows_of(app))
    finally:
        engine.stop()


async def test_in_the_saved_picture_now_sits_under_the_newest_column_and_every_column_has_a_sample() -> None:
    """The picture (an SVG: a viewer without its monospace font places a long text run by its own advances)
    puts each axis label at its own column, "now" ending under the newest cell; the picture's run is long
    enough that no column is "no sample"."""
    app, engine, keys = scene("heatmap")
    try:
        async with app.run_test(size=SIZE) as pilot:
            for key in keys:
                await pilot.press(key)
            await pilot.pause()
            screen = app.screen
            assert isinstance(screen, HeatmapScreen)
            assert all(MISSING_CHAR not in row for row in rows_of(app)), rows_of(app)[0]
            svg = app.export_screenshot()
    finally:
        if engine is not None:
            engine.stop()
    texts = [(float(x), html.unescape(t)) for x, t in re.findall(r'<text[^>]*x="([\d.]+)"[^>]*>([^<]*)</text>', svg)]
    cell_width = next(x for x, t in texts if t.startswith("0\xa0P"))  # the first row's label: column 1 (padding)
    now_x = next(x for x, t in texts if t.strip() == "now")
    end_column = round(now_x / cell_width) + 3
    newest_column = 1 + screen.label_width + 1 + screen.points * screen.cell  # padding, label and gap, the cells
    assert end_column == newest_column
