"""Issue 20, follow-ups on the live view: a --connect feed's all row stays last, the table's sparklines are
drawn against time after an interval change, and the heatmap builds its own event-rate metrics."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_record import record_demo
from textual.widgets import DataTable

from pmutop.feeds.replay import ReplayFeed
from pmutop.recording.reader import read_recording
from pmutop.tui.replay_controls import ReplayApp
from pmutop.tui.table_controller import TOTAL_ROW


def remote_recording(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> Path:
    """A recording whose rows are named host:cpu, as a recording of `pmutop --connect` names them."""
    path = tmp_path / "remote.jsonl"
    record_demo(capsys, path, 4)
    lines = path.read_text().splitlines()
    header = json.loads(lines[0])
    header["backend"]["labels"] = {"0": "alpha:0", "1": "alpha:1", "2": "beta:0"}
    path.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    return path


@pytest.mark.parametrize("sort", [("cpu", False), ("cpu", True), ("util", False), ("ipc", True)])
async def test_a_remote_feeds_all_row_stays_last_whatever_the_sort(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, sort: tuple[str, bool]
) -> None:
    rec = read_recording(str(remote_recording(capsys, tmp_path)))
    feed = ReplayFeed(rec)
    app = ReplayApp(feed, rec.header.run_info())
    try:
        async with app.run_test(size=(160, 40)) as pilot:
            before = app.updates
            for _ in range(3):
                feed.step()
            for _ in range(300):
                if app.updates > before:
                    break
                await pilot.pause(0.02)
            app._set_sort(*sort)
            await pilot.pause(0.05)
            order = app.core_table.rows_in_order()
            assert order[-1] == TOTAL_ROW and sorted(order[:-1]) == ["0", "1", "2"]
            if sort == ("cpu", False):
                assert order == ["0", "1", "2", TOTAL_ROW]
            if sort == ("cpu", True):
                assert order == ["2", "1", "0", TOTAL_ROW]
            table = app.query_one("#cores", DataTable)
            labels = [table.get_cell(row, "cpu").plain.split()[0] for row in order]
            assert labels[-1] == "all" and set(labels[:-1]) == {"alpha:0", "alpha:1", "beta:0"}
    finally:
        feed.close()


@pytest.mark.parametrize("key", ["ipc_hist", "llc_hist"])
async def test_the_tables_sparklines_are_drawn_against_time_after_an_interval_change(key: str) -> None:
    from test_issue20_history_time import run_1s_02s_1s

    from pmutop.app.screenshots import demo_app

    app, engine, _, clock = demo_app(intervals=6)
    try:
        async with app.run_test(size=(200, 50)) as pilot:
            await run_1s_02s_1s(app, pilot, engine, clock)
            table = app.query_one("#cores", DataTable)
            for row in ("0", TOTAL_ROW):
                cell = table.get_cell(row, key).plain
                width = len(cell)
                assert width > 20
                drawn = [i for i, ch in enumerate(cell) if ch != " "]
                # 18 s at a cell a second (today's interval): the rightmost 18 cells, not 42 (one per sample)
                assert drawn == list(range(width - 18, width)), (row, cell)
    finally:
        engine.stop()


def test_the_heatmap_builds_its_event_rate_metrics() -> None:
    from pmutop.tui.heatmap import METRICS, Metric, metrics_for

    metrics = metrics_for(("context_switches", "page_faults"))
    assert metrics[: len(METRICS)] == METRICS
    assert metrics[len(METRICS) :] == (
        Metric("ev:context_switches", "Ctx sw/s", "log", "/s"),
        Metric("ev:page_faults", "Faults/s", "log", "/s"),
    )


async def test_the_heatmap_screen_takes_an_event_rate_metric_by_its_key() -> None:
    from helpers.pilot import screen_text

    from pmutop.app.screenshots import software_app
    from pmutop.tui.screens.heatmap import HeatmapScreen

    app, _ = software_app(cpus=4, intervals=20)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("3")
        await pilot.pause()
        assert isinstance(app.screen, HeatmapScreen)
        app.screen.set_metric("ev:page_faults")
        await pilot.pause()
        assert app.screen.metric.key == "ev:page_faults"
        assert "Heatmap: Faults/s" in screen_text(app)


def test_no_view_keeps_a_binding_the_apps_priority_bindings_shadow() -> None:
    from textual.binding import Binding

    from pmutop.tui.app import PmutopApp
    from pmutop.tui.screens.heatmap import HeatmapScreen
    from pmutop.tui.screens.topdown import TopdownScreen

    def keys(bindings: object, priority: bool | None = None) -> set[str]:
        out: set[str] = set()
        for b in bindings:  # type: ignore[attr-defined]
            assert isinstance(b, Binding)
            if priority is None or b.priority == priority:
                out.update(k.strip() for k in b.key.split(","))
        return out

    shadowing = keys(PmutopApp.BINDINGS, priority=True)
    for screen in (HeatmapScreen, TopdownScreen):
        assert not keys(screen.BINDINGS) & shadowing, screen.__name__
