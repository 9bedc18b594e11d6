"""Issue 20, "Smaller, all to fix" (the live view's part): keys typed in one burst with the key that opens a
dialog, the column picker, the header, the help's config path, the panel titles, the filter, and the
turbostat columns `c` offers."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual import events
from textual.widgets import SelectionList

from pmutop.app.screenshots import demo_app
from pmutop.tui.screens.detail import DetailScreen
from pmutop.tui.screens.heatmap import HeatmapScreen
from pmutop.tui.screens.pickers import ChoiceScreen, ColumnsScreen
from tests.test_issue20_footer_size import screen_text

KEY_CHARS = {"space": " ", "slash": "/", "question_mark": "?"}


async def burst(app, pilot, *keys: str) -> None:  # type: ignore[no-untyped-def]
    """Keys as a fast typist (or a paste) sends them: all queued before the first is handled."""
    for key in keys:
        char = KEY_CHARS.get(key, key if len(key) == 1 else None)
        app._driver.send_message(events.Key(key, char))
    for _ in range(10):
        await pilot.pause(0.05)


async def test_keys_typed_in_one_burst_with_c_reach_the_column_picker() -> None:
    app, engine, _, _ = demo_app(intervals=3, cpus=4, e_cores=0)
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        await burst(app, pilot, "c", "down", "space", "enter")
        assert not isinstance(app.screen, ColumnsScreen)
        assert app.core_table.hidden == {"ghz"} and "ghz" not in app.core_table.widths
        assert not app.paused and not isinstance(app.screen, DetailScreen)
    engine.stop()


async def test_keys_typed_in_one_burst_with_a_view_key_reach_that_view() -> None:
    app, engine, _, _ = demo_app(intervals=3, cpus=4, e_cores=0)
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        await burst(app, pilot, "3", "m", "down", "enter")
        assert isinstance(app.screen, HeatmapScreen) and app.screen.metric.key == "util"
    engine.stop()


async def test_keys_typed_in_one_burst_with_slash_go_to_the_filter() -> None:
    app, engine, _, _ = demo_app(intervals=3, cpus=4, e_cores=0)
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        await burst(app, pilot, "slash", "0", "-", "1", "enter")
        assert app.core_table.shown_rows[:-1] == ["0", "1"]
    engine.stop()


async def test_keys_typed_in_one_burst_with_f6_reach_the_sort_chooser() -> None:
    app, engine, _, _ = demo_app(intervals=3, cpus=4, e_cores=0)
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        await burst(app, pilot, "f6", "down", "enter")
        assert not isinstance(app.screen, ChoiceScreen) and app.core_table.sort_key == "util"
    engine.stop()


def test_the_header_names_the_program_once_and_nests_no_parentheses() -> None:
    from dataclasses import replace

    from pmutop.tui.header import machine_text

    app, engine, _, _ = demo_app(intervals=1, model="adl")
    engine.stop()
    sim = machine_text(app.info).plain
    assert sim.count("pmutop") == 1 and "Alder Lake" in sim
    amd = machine_text(replace(app.info, cpu_model="AMD EPYC", uarch="Zen 4 (Genoa)")).plain
    assert "Zen 4 (Genoa)" in amd and "((" not in amd and "))" not in amd


async def test_one_column_that_does_not_fit_is_said_in_the_singular() -> None:
    app, engine, _, _ = demo_app(intervals=3, cpus=4, e_cores=0)
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        app.core_table.dropped = 1
        app._refresh_header()
        status = screen_text(app).splitlines()[1]
        assert "+1 column (c)" in status and "+1 columns" not in status
    engine.stop()


async def test_the_help_names_the_config_file_actually_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    from pmutop.tui.config import config_path

    app, engine, _, _ = demo_app(intervals=1)
    app.settings_path = config_path()  # as `pmutop` sets it
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        await pilot.press("question_mark")
        await pilot.pause()
        from textual.widgets import Static

        from tests.test_tui import text_of

        text = "".join(text_of(app.screen.query_one("#help-text", Static)).split())  # a long path may fold
        assert str(tmp_path / "pmutop" / "config.toml") in text and "~/.config" not in text
    engine.stop()


def contrast(fg: tuple[int, int, int], bg: tuple[int, int, int]) -> float:
    """WCAG contrast ratio of two sRGB colours."""

    def lum(c: tuple[int, int, int]) -> float:
        ch = [v / 255 for v in c]
        lin = [v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4 for v in ch]
        return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]

    hi, lo = sorted((lum(fg), lum(bg)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


async def test_panel_titles_are_readable() -> None:
    app, engine, _, _ = demo_app(intervals=5, cpus=4, e_cores=0)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        for strip in app.screen._compositor.render_strips():
            segments = [seg for seg in strip if "IPC" in seg.text and "all CPUs" in seg.text]
            if segments:
                style = segments[0].style
                ratio = contrast(tuple(style.color.get_truecolor()), tuple(style.bgcolor.get_truecolor()))  # type: ignore[union-attr, arg-type]
                assert ratio >= 4.5, ratio
                break
        else:
            raise AssertionError("no panel title on screen")
    engine.stop()


def test_the_filter_knows_the_power_columns() -> None:
    from pmutop.tui.filter import parse_filter
    from pmutop.tui.model import CoreState

    f = parse_filter("temp>80 busy>50")
    assert f is not None
    hot = CoreState(0)
    hot.history["temp_c"].append(85.0)
    hot.history["busy"].append(60.0)
    cool = CoreState(1)
    cool.history["temp_c"].append(60.0)
    cool.history["busy"].append(60.0)
    assert f.matches(hot) and not f.matches(cool)
    for text in ("bzymhz>3000", "pkgw>10", "avgmhz>100", "c6>20", "°c>50"):
        assert parse_filter(text) is not None


async def test_p_on_a_cpu_without_core_types_says_so_and_keeps_the_rows() -> None:
    from tests.test_tui_keys import filter_by

    app, engine, _, _ = demo_app(intervals=3, cpus=4, e_cores=0)
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        await filter_by(app, pilot, "P")
        assert len(app.core_table.shown_rows) == 5
        assert any("not hybrid" in str(n.message) for n in app._notifications)
    engine.stop()


async def test_a_filtered_table_says_the_all_row_still_sums_every_cpu() -> None:
    from tests.test_tui_keys import filter_by

    app, engine, _, _ = demo_app(intervals=3, cpus=4, e_cores=0)
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        await filter_by(app, pilot, "0-1")
        status = screen_text(app).splitlines()[1]
        assert "filter 0-1: 2/4" in status and "all = all 4" in status
    engine.stop()


async def test_the_column_picker_says_which_chosen_columns_have_no_room() -> None:
    app, engine, _, _ = demo_app(intervals=3, cpus=4, e_cores=0)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        table = app.core_table
        dropped = [c.key for c in table.columns if table.wanted(c.key) and c.key not in table.widths]
        await pilot.press("c")
        await pilot.pause()
        columns = app.screen.query_one(SelectionList)
        labels = {
            str(columns.get_option_at_index(i).value): str(columns.get_option_at_index(i).prompt)
            for i in range(columns.option_count)
        }
        assert dropped and all("no room" in labels[k] for k in dropped)
        assert all("no room" not in labels[k] for k in app.core_table.widths if k != "cpu")
    engine.stop()


async def test_c_offers_the_turbostat_columns_the_run_collects() -> None:
    app, engine, _, clock = demo_app(intervals=5, cpus=4, e_cores=0, model="adl")
    async with app.run_test(size=(250, 70)) as pilot:
        from tests.test_tui import tick

        for _ in range(3):
            await tick(app, pilot, engine, clock)
        keys = {c.key for c in app.core_table.columns}
        assert {"avg_mhz", "cs:C1", "cs:C6", "throttle"} <= keys
        await pilot.press("c")
        await pilot.pause()
        columns = app.screen.query_one(SelectionList)
        prompts = [str(columns.get_option_at_index(i).prompt) for i in range(columns.option_count)]
        assert any(p.startswith("AvgMHz") for p in prompts) and any(p.startswith("C6%") for p in prompts)
        # Off until chosen (the room goes to the sparklines); ticked, they show and are kept.
        assert "avg_mhz" not in app.core_table.widths
        columns.select("avg_mhz")
        columns.select("cs:C6")
        await pilot.press("enter")
        await pilot.pause()
        assert {"avg_mhz", "cs:C6"} <= set(app.core_table.widths)
        assert app.settings.shown_columns == ["avg_mhz", "cs:C6"]
    engine.stop()


def test_an_event_no_column_is_made_of_gets_its_own_rate_column() -> None:
    """`--events cycles,instructions,branches`: nothing derives from `branches` alone (Br miss% needs the
    misses too), so the live table offers its rate, as the batch table does."""
    from pmutop.tui.columns import columns_for

    titles = [c.title for c in columns_for(["instructions", "cycles", "ref_cycles", "branches"])]
    assert "Br miss%" not in titles
    assert "Branches/s" in titles or "branches/s" in titles
