"""The live view's keys people bring from htop/btop, its filter, its history panels, its settings and its
size limits, driven with Pilot over the simulated PMU."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import DataTable, Input, OptionList, SelectionList, Static

from pmutop.app.screenshots import demo_app, software_app
from pmutop.tui.config import Settings, config_path, load
from pmutop.tui.screens.detail import DetailScreen
from pmutop.tui.screens.heatmap import HeatmapScreen
from pmutop.tui.screens.pickers import ChoiceScreen, ColumnsScreen
from pmutop.tui.screens.too_small import TooSmallScreen
from pmutop.tui.widgets.history_panel import HistoryPanels
from pmutop.tui.widgets.plot import HistoryPlot
from tests.test_tui import WIDE, row_order, text_of, tick


def panel_titles(app) -> list[str]:  # type: ignore[no-untyped-def]
    return [str(p.border_title) for p in app.query_one("#history", HistoryPanels).query(HistoryPlot) if p.display]


async def choose(app, pilot, key: str) -> None:  # type: ignore[no-untyped-def]
    """Highlight `key` in the open chooser and press Enter."""
    options = app.screen.query_one(OptionList)
    options.highlighted = next(i for i in range(options.option_count) if options.get_option_at_index(i).id == key)
    await pilot.press("enter")
    await pilot.pause()


def status(app) -> str:  # type: ignore[no-untyped-def]
    return text_of(app.query_one("#status", Static))


async def test_history_panels_fill_the_screen_below_the_table_and_follow_the_highlight() -> None:
    app, engine, _, clock = demo_app(intervals=30, cpus=8, e_cores=0)
    async with app.run_test(size=(120, 40)) as pilot:
        await tick(app, pilot, engine, clock)
        table = app.query_one(DataTable)
        assert table.size.height == 10  # header + 8 cores + all: no empty rows inside the table
        panels = app.query_one("#history", HistoryPanels)
        assert panels.display and panels.size.height >= 20
        assert panel_titles(app) == ["all CPUs · IPC", "all CPUs · GHz", "all CPUs · Util %", "all CPUs · LLC miss/s"]
        await pilot.press("down")
        await pilot.pause()
        assert panel_titles(app)[0] == "cpu 1 · IPC"
        plot = panels.query(HistoryPlot).first()
        rendered = "\n".join(plot.body.render_line(y).text for y in range(plot.content_size.height))
        assert "┤" in rendered and rendered.splitlines()[-1].rstrip().endswith("now")  # axes and a time scale
        assert "s " in rendered.splitlines()[-1]  # how long ago the left edge is
    engine.stop()


async def test_short_terminals_give_the_rows_to_the_table() -> None:
    app, engine, _, clock = demo_app(intervals=3, cpus=16, e_cores=0)
    async with app.run_test(size=(80, 24)) as pilot:
        await tick(app, pilot, engine, clock)
        assert not app.query_one("#history", HistoryPanels).display
    engine.stop()


async def test_software_only_runs_plot_and_explain_what_is_measured() -> None:
    app, _ = software_app(cpus=4, intervals=20)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert panel_titles(app) == [
            "all CPUs · Util %",
            "all CPUs · Ctx sw/s",
            "all CPUs · Migr/s",
            "all CPUs · Faults/s",
        ]
        await pilot.press("enter")
        assert isinstance(app.screen, DetailScreen)
        titles = [str(p.border_title) for p in app.screen.query(HistoryPlot)]
        assert "IPC" not in " ".join(titles) and "Ctx sw/s" in " ".join(titles)
        formulas = text_of(app.screen.query_one("#formulas", Static))
        assert "ref_cycles" not in formulas and "kernel's per-CPU times" in formulas
        assert "context_switches / interval" in formulas
        app.exit()


async def test_f10_quits() -> None:
    app, engine, _, _ = demo_app(intervals=2)
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("f10")
        await pilot.pause()
    assert app.return_code == 0 and not app.is_running
    engine.stop()


async def test_angle_brackets_step_the_sort_column_and_never_pick_a_hidden_one() -> None:
    app, engine, _, clock = demo_app(intervals=3, cpus=4, e_cores=0)
    async with app.run_test(size=(80, 24)) as pilot:
        await tick(app, pilot, engine, clock)
        shown = [k for k in app.core_table.widths if app.core_table.by_key[k].sort_value is not None]
        table = app.core_table
        hidden = [c.key for c in table.columns if table.wanted(c.key) and c.key not in table.widths]
        assert hidden and f"+{len(hidden)} columns" in status(app)
        seen = []
        for _ in range(len(shown)):
            await pilot.press("greater_than_sign")
            seen.append(app.core_table.sort_key)
        assert set(seen) == set(shown) and not set(seen) & set(hidden)
        await pilot.press("less_than_sign")
        assert app.core_table.sort_key == seen[-2]
    engine.stop()


async def test_a_sort_column_hidden_by_a_resize_is_said_to_be_hidden() -> None:
    app, engine, _, clock = demo_app(intervals=3, cpus=4, e_cores=0)
    async with app.run_test(size=WIDE) as pilot:
        await tick(app, pilot, engine, clock)
        app._set_sort("br_ratio", True)
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        assert "br_ratio" not in app.core_table.widths
        assert "sort Br miss% (hidden column) ▼" in status(app)
    engine.stop()


async def test_f6_chooses_the_sort_column_from_a_list() -> None:
    app, engine, _, clock = demo_app(intervals=3, cpus=4, e_cores=0)
    async with app.run_test(size=WIDE) as pilot:
        await tick(app, pilot, engine, clock)
        await pilot.press("f6")
        assert isinstance(app.screen, ChoiceScreen)
        await choose(app, pilot, "ipc")
        assert app.core_table.sort_key == "ipc" and app.core_table.reverse
        ipcs = [app.model.cores[int(r)].metrics.ipc for r in row_order(app)[:-1]]  # type: ignore[union-attr]
        assert ipcs == sorted(ipcs, reverse=True)
    engine.stop()


async def test_pgup_pgdn_move_the_highlight_by_a_page() -> None:
    app, engine, _, clock = demo_app(intervals=2, cpus=64, e_cores=0)
    async with app.run_test(size=(100, 30)) as pilot:
        await tick(app, pilot, engine, clock)
        table = app.query_one(DataTable)
        await pilot.press("pagedown")
        assert table.cursor_row > 10
        await pilot.press("pageup")
        assert table.cursor_row == 0
    engine.stop()


async def filter_by(app, pilot, text: str) -> None:  # type: ignore[no-untyped-def]
    await pilot.press("slash")
    bar = app.query_one("#filter", Input)
    assert bar.display and bar.has_focus
    bar.value = text
    await pilot.press("enter")
    await pilot.pause()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0-2,9", ["0", "1", "2", "9"]),
        ("E", ["8", "9", "10", "11"]),
        ("P 6-9", ["6", "7"]),
    ],
)
async def test_slash_filters_rows_by_cpu_list_and_core_type(text: str, expected: list[str]) -> None:
    app, engine, _, clock = demo_app(intervals=3)
    async with app.run_test(size=WIDE) as pilot:
        await tick(app, pilot, engine, clock)
        await filter_by(app, pilot, text)
        assert row_order(app) == [*expected, "total"]
        assert f"{len(expected)}/12" in status(app)
        await pilot.press("backslash")
        await pilot.pause()
        assert len(row_order(app)) == 13 and "filter" not in status(app)
    engine.stop()


async def test_a_condition_filter_follows_the_numbers_every_interval() -> None:
    app, engine, _, clock = demo_app(intervals=3)
    async with app.run_test(size=WIDE) as pilot:
        await tick(app, pilot, engine, clock)
        await filter_by(app, pilot, "util > 50")
        for _ in range(3):
            shown = row_order(app)[:-1]
            busy = [str(c) for c, core in app.model.cores.items() if core.metrics and core.metrics.util > 0.5]
            assert sorted(shown, key=int) == busy and shown
            await tick(app, pilot, engine, clock)
    engine.stop()


async def test_a_bad_filter_is_said_in_one_line_and_the_rows_stay() -> None:
    app, engine, _, clock = demo_app(intervals=3)
    async with app.run_test(size=WIDE) as pilot:
        await tick(app, pilot, engine, clock)
        await filter_by(app, pilot, "speed>3")
        assert len(row_order(app)) == 13
        assert any("no column 'speed'" in str(n.message) for n in app._notifications)
    engine.stop()


async def test_c_chooses_columns_and_the_choice_is_saved(tmp_path: Path) -> None:
    app, engine, _, clock = demo_app(intervals=3, cpus=4, e_cores=0)
    app.settings_path = tmp_path / "pmutop" / "config.toml"
    async with app.run_test(size=WIDE) as pilot:
        await tick(app, pilot, engine, clock)
        await pilot.press("c")
        assert isinstance(app.screen, ColumnsScreen)
        app.screen.query_one(SelectionList).deselect("task")
        await pilot.press("enter")
        await pilot.pause()
        assert "task" not in app.core_table.widths
    saved, problem = load(app.settings_path)
    assert problem is None and saved.hidden_columns == ["task"]
    engine.stop()


async def test_m_chooses_the_heatmap_metric() -> None:
    app, engine, _, clock = demo_app(intervals=3)
    async with app.run_test(size=WIDE) as pilot:
        await tick(app, pilot, engine, clock)
        await pilot.press("m")
        assert isinstance(app.screen, ChoiceScreen)
        await choose(app, pilot, "util")
        assert isinstance(app.screen, HeatmapScreen) and app.screen.metric.key == "util"
    engine.stop()


async def test_settings_come_back_next_run(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    app, engine, _, clock = demo_app(intervals=3, cpus=4, e_cores=0)
    app.settings_path = path
    async with app.run_test(size=WIDE) as pilot:
        await tick(app, pilot, engine, clock)
        await pilot.press("s", "s", "s", "r", "plus", "3")
        await pilot.pause()
    engine.stop()
    saved, problem = load(path)
    assert problem is None
    assert (saved.sort, saved.reverse, saved.interval, saved.view) == ("ipc", False, 2.0, "heatmap")
    app, engine, _, clock = demo_app(intervals=3, cpus=4, e_cores=0)
    app.__init__(app.feed, app.info, app.tasks, settings=saved, settings_path=path)  # type: ignore[misc]
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, HeatmapScreen)
        assert app.core_table.sort_key == "ipc" and not app.core_table.reverse
    engine.stop()


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("sort = [", "ignoring"),
        ('view = "sideways"', "view must be one of"),
        ("interval = 0", "interval must be"),
        ("reverse = 3", "wrong type"),
        (b"\xff\xfe", "ignoring"),
    ],
)
def test_a_bad_config_file_gives_one_line_and_the_defaults(tmp_path: Path, content: str | bytes, why: str) -> None:
    path = tmp_path / "config.toml"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    settings, problem = load(path)
    assert settings == Settings()
    assert problem is not None and why in problem and "\n" not in problem and str(path) in problem


def test_the_config_lives_under_xdg_config_home(tmp_path: Path) -> None:
    assert config_path({"XDG_CONFIG_HOME": str(tmp_path)}) == tmp_path / "pmutop" / "config.toml"
    assert config_path({"HOME": "/home/u"}) == Path("/home/u/.config/pmutop/config.toml")


async def test_below_40x12_one_line_says_the_terminal_is_too_small() -> None:
    app, engine, _, clock = demo_app(intervals=3)
    async with app.run_test(size=(39, 11)) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, TooSmallScreen)
        assert "terminal too small (39x11)" in text_of(app.screen.query_one(Static))
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        assert not isinstance(app.screen, TooSmallScreen)
        await tick(app, pilot, engine, clock)
    engine.stop()


@pytest.mark.parametrize("keys", [(), ("enter",), ("t",), ("3",), ("question_mark",), ("slash",)])
async def test_no_size_from_40x12_to_250x70_breaks_any_view(keys: tuple[str, ...]) -> None:
    app, engine, _, clock = demo_app(intervals=5, cpus=24, e_cores=8)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press(*keys)
        for size in ((40, 12), (41, 13), (60, 20), (80, 24), (100, 30), (160, 50), (250, 70)):
            await pilot.resize_terminal(*size)
            await tick(app, pilot, engine, clock)
            assert app.failure is None and app.is_running
            if size == (40, 12):
                assert not isinstance(app.screen, TooSmallScreen)
    engine.stop()


async def test_the_header_never_wraps() -> None:
    app, engine, _, clock = demo_app(intervals=3)
    async with app.run_test(size=(80, 24)) as pilot:
        await tick(app, pilot, engine, clock)
        for widget in ("#machine", "#status", "#banner"):
            assert app.query_one(widget).size.height <= 1
    engine.stop()


async def test_the_task_scan_rests_while_paused() -> None:
    app, engine, _, clock = demo_app(intervals=3)
    calls = []
    real = app.tasks.top_per_cpu
    app.tasks.top_per_cpu = lambda: calls.append(1) or real()  # type: ignore[method-assign]
    async with app.run_test(size=WIDE) as pilot:
        await tick(app, pilot, engine, clock)
        await pilot.press("space")
        before = len(calls)
        for _ in range(3):
            clock.advance(1.0)
            engine.tick()
            await pilot.pause(0.15)
        assert len(calls) == before
        await pilot.press("space")
        await tick(app, pilot, engine, clock)
        assert len(calls) > before
    engine.stop()


async def test_only_rows_on_screen_are_rendered_each_interval_and_the_rest_on_scroll() -> None:
    app, engine, _, clock = demo_app(intervals=2, cpus=128, e_cores=0)
    async with app.run_test(size=(100, 30)) as pilot:
        await tick(app, pilot, engine, clock)
        table = app.query_one(DataTable)
        updated: list[str] = []
        real = table.set_cells  # type: ignore[attr-defined]

        def spy(changes):  # type: ignore[no-untyped-def]
            changes = list(changes)
            updated.extend(row for row, _, _ in changes)
            return real(changes)

        table.set_cells = spy  # type: ignore[attr-defined]
        await tick(app, pilot, engine, clock)
        assert updated and len(set(updated)) <= table.size.height + 2
        await pilot.press("end")
        await pilot.pause()
        await pilot.pause(0.1)
        latest = engine.rings[120].latest()
        from pmutop.derive.metrics import for_sample

        assert table.get_cell("120", "ipc").plain.strip() == f"{for_sample(latest).ipc:.2f}"  # type: ignore[arg-type]
    engine.stop()


async def test_rows_are_reordered_only_when_the_order_changed() -> None:
    app, engine, _, clock = demo_app(intervals=2, cpus=8, e_cores=0)
    async with app.run_test(size=WIDE) as pilot:
        await tick(app, pilot, engine, clock)
        table = app.query_one(DataTable)
        sorts = []
        real = table.sort
        table.sort = lambda *a, **kw: sorts.append(1) or real(*a, **kw)  # type: ignore[method-assign]
        for _ in range(3):
            await tick(app, pilot, engine, clock)
        assert sorts == []  # sorted by CPU: the order never changes
    engine.stop()


async def test_a_header_tick_while_the_app_closes_is_no_internal_error() -> None:
    # The 1 s header timer can fire while Textual removes the screen's widgets on the way out.
    app, engine, _, _ = demo_app(intervals=2)
    async with app.run_test(size=WIDE) as pilot:
        await app.query_one("#status").remove()
        await pilot.pause()
        app._refresh_header()
        assert app.failure is None
    engine.stop()


async def test_quitting_wakes_the_sample_watcher_at_once() -> None:
    # The watcher thread blocks in the feed's wait (no polling); quitting waits for that thread, so q must
    # end the wait, not let it run out (what made q take up to its timeout).
    import threading

    from pmutop.app.screenshots import ScriptedFeed

    class BlockingFeed(ScriptedFeed):
        def __init__(self, *a, **kw) -> None:  # type: ignore[no-untyped-def]
            super().__init__(*a, **kw)
            self.woken = threading.Event()
            self.ended_by_wake = False

        def wait_for_samples(self, counts, timeout, on_wait=None, stop=None) -> bool:  # type: ignore[no-untyped-def]
            self.ended_by_wake = self.woken.wait(timeout) or self.ended_by_wake
            return False

        def wake_waiters(self) -> None:
            self.woken.set()

    app, scripted = software_app(cpus=2, intervals=3)
    feed = BlockingFeed(scripted.cpus, [[r.latest() for r in scripted.rings.values()]])  # type: ignore[misc]
    app.feed = feed
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("q")
        await pilot.pause()
    assert feed.ended_by_wake
