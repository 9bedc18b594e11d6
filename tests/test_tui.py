"""The live view driven as a person would (Pilot), over the simulated PMU with a manual clock."""

from __future__ import annotations

import pytest
from helpers.pilot import text_of
from textual.widgets import DataTable, Static

from pmutop.app.screenshots import demo_app
from pmutop.core.errors import HardwareError
from pmutop.derive.metrics import for_sample
from pmutop.pmu import registers
from pmutop.pmu.events import parse_events
from pmutop.tui import format as fmt
from pmutop.tui.app import PmutopApp
from pmutop.tui.columns import columns_for
from pmutop.tui.screens.detail import DetailScreen
from pmutop.tui.screens.help import HelpScreen

WIDE = (160, 50)


def footer_text(app: PmutopApp) -> str:
    from textual.widgets import Footer

    return " ".join(str(k.render()) for k in app.screen.query_one(Footer).query("FooterKey"))


def cell(app: PmutopApp, row: str, column: str) -> str:
    return app.query_one(DataTable).get_cell(row, column).plain


def row_order(app: PmutopApp) -> list[str]:
    table = app.query_one(DataTable)
    return [table.coordinate_to_cell_key((i, 0)).row_key.value for i in range(table.row_count)]  # type: ignore[misc]


async def next_update(app: PmutopApp, pilot, before: int) -> None:  # type: ignore[no-untyped-def]
    for _ in range(300):
        if app.updates > before:
            return
        await pilot.pause(0.02)
    raise AssertionError("no UI update arrived")


async def tick(app: PmutopApp, pilot, engine, clock, seconds: float = 1.0) -> None:  # type: ignore[no-untyped-def]
    before = app.updates
    clock.advance(seconds)
    engine.tick()
    await next_update(app, pilot, before)


async def test_table_shows_the_metrics_module_values_for_the_latest_samples() -> None:
    app, engine, _, clock = demo_app(intervals=3)
    async with app.run_test(size=WIDE) as pilot:
        await tick(app, pilot, engine, clock)
        for cpu in engine.cpus:
            m = for_sample(engine.rings[cpu].latest())  # type: ignore[arg-type]
            row = str(cpu)
            assert cell(app, row, "util").strip() == f"{m.util * 100:.1f}"  # type: ignore[operator]
            assert cell(app, row, "ghz").strip() == f"{m.ghz:.2f}"
            assert cell(app, row, "ipc").strip() == f"{m.ipc:.2f}"
            assert cell(app, row, "llc_per_s") == fmt.si(m.llc_misses_per_s, 11)
            assert cell(app, row, "mpki").strip() == f"{m.llc_mpki:.2f}"
            assert cell(app, row, "llc_ratio").strip() == f"{m.llc_miss_ratio * 100:.1f}"  # type: ignore[operator]
            assert cell(app, row, "br_ratio").strip() == f"{m.branch_miss_ratio * 100:.2f}"  # type: ignore[operator]
        labels = [cell(app, str(c), "cpu").strip() for c in engine.cpus]
        assert labels[0] == "0 P" and labels[-1] == "11 E"  # hybrid core types
        assert cell(app, "total", "cpu").strip() == "all"
    engine.stop()


async def test_each_interval_updates_only_changed_cells() -> None:
    app, engine, _, clock = demo_app(intervals=3)
    async with app.run_test(size=WIDE) as pilot:
        table = app.query_one(DataTable)
        calls: list[tuple[str, str]] = []
        original = table.set_cells  # type: ignore[attr-defined]

        def spy(changes):  # type: ignore[no-untyped-def]
            changes = list(changes)
            calls.extend((str(row_key), str(column_key)) for row_key, column_key, _ in changes)
            return original(changes)

        table.set_cells = spy  # type: ignore[attr-defined]
        await tick(app, pilot, engine, clock)
        assert calls  # numbers moved
        assert not any(col == "cpu" for _, col in calls)  # labels never change
        assert len(calls) == len(set(calls))  # one write per changed cell
        rows_before = table.row_count
        await tick(app, pilot, engine, clock)
        assert table.row_count == rows_before == len(engine.cpus) + 1  # rows are never re-created
    engine.stop()


async def test_quit_key_ends_the_app_and_the_pmu_is_restored() -> None:
    app, engine, platform, _ = demo_app(intervals=2)
    async with app.run_test(size=WIDE) as pilot:
        assert platform.machine.msr(0).read(registers.IA32_PERF_GLOBAL_CTRL) == 0x7_0000_000F
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 0
    assert engine.stop().failures == []
    for cpu in engine.cpus:
        dev = platform.machine.msr(cpu)
        assert dev.read(registers.IA32_PERF_GLOBAL_CTRL) == 0
        assert dev.read(registers.IA32_FIXED_CTR_CTRL) == 0
        assert [dev.read(registers.evtsel(i)) for i in range(4)] == [0, 0, 0, 0]


async def test_ctrl_c_quits_too() -> None:
    app, engine, _, _ = demo_app(intervals=1)
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("ctrl+c")
        await pilot.pause()
    assert app.return_code == 0
    engine.stop()


@pytest.mark.parametrize("key", ["space", "p"])
async def test_pause_freezes_the_display_while_counting_goes_on(key: str) -> None:
    app, engine, _, clock = demo_app(intervals=3)
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press(key)
        await pilot.pause()
        # Said once (the banner), and the footer offers Resume instead of Pause.
        assert "PAUSED" in text_of(app.query_one("#banner", Static))
        assert "PAUSED" not in text_of(app.query_one("#status", Static))
        assert footer_text(app).count("Resume") == 1 and "Pause" not in footer_text(app)
        frozen = cell(app, "0", "ipc")
        seen = app.model.cores[0].seen
        before = app.updates
        for _ in range(5):  # the samplers keep counting
            clock.advance(1.0)
            engine.tick()
        await pilot.pause(0.3)
        assert app.updates == before and cell(app, "0", "ipc") == frozen
        assert app.model.cores[0].seen == seen and engine.rings[0].count == seen + 5
        await pilot.press(key)
        await pilot.pause()
        assert "PAUSED" not in text_of(app.query_one("#banner", Static))
        assert "Pause" in footer_text(app) and "Resume" not in footer_text(app)
        assert app.model.cores[0].seen == seen + 5  # caught up, history complete
        m = for_sample(engine.rings[0].latest())  # type: ignore[arg-type]
        assert cell(app, "0", "ipc").strip() == f"{m.ipc:.2f}"
    engine.stop()


async def test_plus_and_minus_change_the_interval() -> None:
    app, engine, _, _ = demo_app(intervals=1)
    async with app.run_test(size=WIDE) as pilot:
        assert engine.interval == 1.0
        await pilot.press("plus")
        assert engine.interval == 2.0
        await pilot.press("minus", "minus")
        assert engine.interval == 0.5
        assert "interval 0.5 s" in text_of(app.query_one("#status", Static))
        for _ in range(6):
            await pilot.press("minus")
        assert engine.interval == 0.1  # the shortest step
    engine.stop()


async def test_changing_the_interval_keeps_the_elapsed_time_and_marks_the_history() -> None:
    app, engine, _, clock = demo_app(intervals=5)
    async with app.run_test(size=WIDE) as pilot:
        clock.advance(0.5)
        await pilot.press("plus")
        await pilot.pause()
        assert "5.5 s" in text_of(app.query_one("#status", Static)) or "0:05" in text_of(
            app.query_one("#status", Static)
        )
        for _ in range(3):
            await tick(app, pilot, engine, clock, 2.0)
        assert engine.rings[0].latest().time == pytest.approx(11.5, abs=0.01)  # type: ignore[union-attr]
        await pilot.press("enter")
        await pilot.pause()
        title = text_of(app.screen.query_one("#detail-title", Static))
        assert "interval 1 s → 2 s 6 s ago" in title  # three 2 s intervals
    engine.stop()


async def test_s_cycles_the_sort_column_and_r_reverses() -> None:
    app, engine, _, _ = demo_app(intervals=5)
    async with app.run_test(size=WIDE) as pilot:
        assert row_order(app) == [*map(str, engine.cpus), "total"]
        await pilot.press("s")  # util, highest first
        assert app.core_table.sort_key == "util" and app.core_table.reverse
        utils = [app.model.cores[int(r)].metrics.util for r in row_order(app)[:-1]]  # type: ignore[union-attr]
        assert utils == sorted(utils, reverse=True)
        assert row_order(app)[-1] == "total"
        assert str(app.query_one(DataTable).columns["util"].label) == "Util%▼"  # type: ignore[index]
        await pilot.press("r")
        utils = [app.model.cores[int(r)].metrics.util for r in row_order(app)[:-1]]  # type: ignore[union-attr]
        assert utils == sorted(utils) and row_order(app)[-1] == "total"
        await pilot.press("s")
        assert app.core_table.sort_key == "ghz"
    engine.stop()


async def test_clicking_a_header_sorts_by_it() -> None:
    app, engine, _, _ = demo_app(intervals=5)
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        widths = app.core_table.widths  # the columns on screen (power and turbostat ones included)
        x = sum(w + 2 for k, w in widths.items() if k in ("cpu", "util", "ghz", "ipc", "ipc_hist")) + 2
        await pilot.click(DataTable, offset=(x, 0))  # the "LLC miss/s" header
        assert app.core_table.sort_key == "llc_per_s" and app.core_table.reverse
        rates = [app.model.cores[int(r)].metrics.llc_misses_per_s for r in row_order(app)[:-1]]  # type: ignore[union-attr]
        assert rates == sorted(rates, reverse=True)
        await pilot.click(DataTable, offset=(x, 0))  # again: reversed
        assert app.core_table.sort_key == "llc_per_s" and not app.core_table.reverse
    engine.stop()


async def test_the_highlight_follows_its_core_when_rows_are_resorted() -> None:
    app, engine, _, clock = demo_app(intervals=5)
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("s", "down", "down")
        chosen = app.core_table.cursor_row_key()
        for _ in range(15):  # phases change: the order changes
            await tick(app, pilot, engine, clock, 2.0)
            assert app.core_table.cursor_row_key() == chosen
    engine.stop()


async def test_enter_opens_the_detail_of_the_highlighted_core_and_escape_returns() -> None:
    app, engine, _, clock = demo_app(intervals=10)
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("down", "down", "enter")
        screen = app.screen
        assert isinstance(screen, DetailScreen) and screen.cpu == 2
        latest = engine.rings[2].latest()
        assert latest is not None
        assert f"{latest.counts['instructions']:,}" in text_of(screen.query_one("#deltas", Static))
        await tick(app, pilot, engine, clock)
        latest = engine.rings[2].latest()
        assert f"{latest.counts['cycles']:,}" in text_of(screen.query_one("#deltas", Static))  # type: ignore[union-attr]
        assert "100 × llc_misses / llc_references" in text_of(screen.query_one("#formulas", Static))
        await pilot.press("escape")
        assert not isinstance(app.screen, DetailScreen)
    engine.stop()


@pytest.mark.parametrize("key", ["question_mark", "h", "f1"])
async def test_help_lists_every_key_and_says_how_to_close_it(key: str) -> None:
    app, engine, _, _ = demo_app(intervals=1)
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press(key)
        assert isinstance(app.screen, HelpScreen)
        text = text_of(app.screen.query_one("#help-text", Static))
        for k in ("q, F10, Ctrl+C", "space, p", "+", "-", "s", "r", "Enter", "Esc", "F1, ?, h", "click a header"):
            assert k in text
        for k in ("F6", "/", "\\", "PgUp", "m", "c", "closes this help"):
            assert k in text
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
    engine.stop()


async def test_narrow_terminal_drops_columns_by_priority_and_resizes_live() -> None:
    app, engine, _, _ = demo_app(intervals=3)
    async with app.run_test(size=(80, 24)) as pilot:
        cols = [c.value for c in app.query_one(DataTable).columns]
        assert cols == ["cpu", "util", "ghz", "ipc", "ipc_hist", "llc_per_s", "mpki", "task"]
        await pilot.resize_terminal(160, 50)
        await pilot.pause()
        cols = [c.value for c in app.query_one(DataTable).columns]
        assert "llc_hist" in cols and "br_ratio" in cols and len(cols) == 15  # 11 + 4 power columns
        assert {"busy", "bzy_mhz", "temp_c", "pkg_watts"} <= set(cols)
        assert app.query_one(DataTable).row_count == len(engine.cpus) + 1
    engine.stop()


async def test_a_failing_core_is_marked_and_announced() -> None:
    app, engine, _, clock = demo_app(intervals=2)
    async with app.run_test(size=WIDE) as pilot:

        def broken():  # type: ignore[no-untyped-def]
            raise HardwareError("cpu 3: read of IA32_PERF_GLOBAL_STATUS (0x38e) failed: No such device")

        engine.samplers[3].counters.read = broken  # type: ignore[method-assign]
        await tick(app, pilot, engine, clock)
        assert cell(app, "3", "util").strip() == "failed"
        assert "1 core failed" in text_of(app.query_one("#banner", Static))
        assert any("No such device" in str(n.message) for n in app._notifications)
        assert cell(app, "4", "util").strip() != "failed"  # the others go on
    engine.stop()


async def test_a_suspect_sample_shows_a_question_mark_not_numbers() -> None:
    app, engine, platform, clock = demo_app(intervals=2)
    async with app.run_test(size=WIDE) as pilot:
        platform.machine.set_status_bits(5, registers.STATUS_CTR_FRZ)
        await tick(app, pilot, engine, clock)
        assert cell(app, "5", "ipc").strip() == "?"
        assert "1 suspect samples" in text_of(app.query_one("#banner", Static))
        await tick(app, pilot, engine, clock)
        assert cell(app, "5", "ipc").strip() != "?"
    engine.stop()


async def test_banner_says_simulated() -> None:
    app, engine, _, _ = demo_app(intervals=1)
    async with app.run_test(size=(80, 24)):
        assert "SIMULATED" in text_of(app.query_one("#banner", Static))
    engine.stop()


async def test_rotated_events_are_marked_as_estimates() -> None:
    events = parse_events(["llc-references,llc-misses,branches,branch-misses"])
    app, engine, _, clock = demo_app(intervals=4, events=events, gp_counters=2, cpus=2, e_cores=0)
    async with app.run_test(size=WIDE) as pilot:
        await tick(app, pilot, engine, clock)
        assert cell(app, "0", "llc_per_s").strip().startswith("~")
        assert cell(app, "0", "br_ratio").strip().startswith("~")
        assert not cell(app, "0", "ipc").strip().startswith("~")  # fixed counters never rotate
    engine.stop()


def test_columns_follow_the_counted_events() -> None:
    software = [c.key for c in columns_for(["context_switches", "cpu_migrations", "page_faults"])]
    assert software == ["cpu", "util", "ev:context_switches", "ev:cpu_migrations", "ev:page_faults", "task"]
    full = [c.key for c in columns_for(["instructions", "cycles", "ref_cycles", "llc_misses", "r01c4"])]
    assert full == ["cpu", "util", "ghz", "ipc", "ipc_hist", "llc_per_s", "mpki", "llc_hist", "ev:r01c4", "task"]
    titles = {c.key: c.title for c in columns_for(["context_switches", "mem_load_retired_l3_miss"])}
    assert titles["ev:context_switches"] == "Ctx sw/s" and titles["ev:mem_load_retired_l3_miss"] == "mem_load_re/s"


async def test_detail_view_shows_how_much_of_the_time_estimates_were_counted() -> None:
    events = parse_events(["llc-references,llc-misses,branches,branch-misses"])
    app, engine, _, clock = demo_app(intervals=4, events=events, gp_counters=2, cpus=2, e_cores=0)
    async with app.run_test(size=WIDE) as pilot:
        await tick(app, pilot, engine, clock)
        await pilot.press("enter")
        text = text_of(app.screen.query_one("#deltas", Static))
        assert "counted" in text
        line = next(row for row in text.splitlines() if row.strip().startswith("llc_misses"))
        assert "~" in line and line.rstrip().endswith("50%")
        cycles = next(row for row in text.splitlines() if row.strip().startswith("cycles"))
        assert "~" not in cycles and "%" not in cycles
    engine.stop()


async def test_the_all_row_sums_event_rates_over_cores() -> None:
    app, engine, _, clock = demo_app(intervals=2, events=parse_events(["event=0xd1,umask=0x01"]), cpus=3, e_cores=0)
    async with app.run_test(size=WIDE) as pilot:
        await tick(app, pilot, engine, clock)
        rates = [engine.rings[c].latest().counts["r01d1"] for c in engine.cpus]  # type: ignore[union-attr]
        assert cell(app, "total", "ev:r01d1") == fmt.si(sum(rates) / 1.0, len(cell(app, "total", "ev:r01d1")))
        assert cell(app, "1", "ev:r01d1") == fmt.si(rates[1] / 1.0, len(cell(app, "1", "ev:r01d1")))
    engine.stop()


async def test_enter_on_the_all_row_opens_the_machine_wide_detail() -> None:
    from pmutop.tui.screens.detail import DetailScreen

    app, engine, _, _ = demo_app(intervals=3, cpus=4, e_cores=0)
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("end")
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, DetailScreen) and app.screen.cpu == -1
        assert text_of(app.screen.query_one("#detail-title", Static)).startswith("all 4 CPUs")
    engine.stop()


async def test_number_keys_switch_views_as_in_btop() -> None:
    from pmutop.tui.screens.heatmap import HeatmapScreen
    from pmutop.tui.screens.topdown import TopdownScreen

    app, engine, _, _ = demo_app(intervals=5)
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("2")
        assert isinstance(app.screen, TopdownScreen)
        await pilot.press("3")
        assert isinstance(app.screen, HeatmapScreen)
        await pilot.press("1")
        assert not isinstance(app.screen, (TopdownScreen, HeatmapScreen)) and len(app.screen_stack) == 1
        await pilot.press("3", "escape")
        assert len(app.screen_stack) == 1
    engine.stop()
