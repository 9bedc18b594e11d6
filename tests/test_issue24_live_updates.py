"""Issue 24, the live view's cost at a 1 s refresh: each interval is one screen update, never two. The DRAM line
and the package rows show the interval's reading in the same update as its CPU rows (a poll of their own four
times a second cost a second screen refresh per interval); a history plot redraws only the lines that changed."""

from __future__ import annotations

import re
import sys
import threading
import time
from pathlib import Path
from unittest.mock import patch

import pytest
from textual.app import App, ComposeResult
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Static

from pmutop.app.screenshots import demo_app
from pmutop.core.sample import Sample
from pmutop.core.timeline import Timeline
from pmutop.engine.package_sampler import PackageSampler
from pmutop.feeds.replay import ReplayFeed
from pmutop.recording.reader import read_recording
from pmutop.tui import interval_readings
from pmutop.tui.screens.processes import ProcessesScreen
from pmutop.tui.widgets.kept_lines import KeptFooter, KeptStatic
from pmutop.tui.widgets.plot import HistoryPlot, PlotLines
from tests.helpers.fake_tasks import task_app
from tests.helpers.flags import needs_tmux
from tests.helpers.pilot import text_of
from tests.test_issue22_package_records import record
from tests.test_tmux import Tmux
from tests.test_tui import WIDE, next_update


def test_a_timeline_wait_ends_when_a_reading_comes_and_times_out_when_none_does() -> None:
    timeline: Timeline[int] = Timeline()
    assert timeline.wait_past(0, 0.01) is False
    threading.Timer(0.05, lambda: timeline.append(1.0, 7)).start()
    assert timeline.wait_past(0, 5.0) is True and timeline.latest() == 7
    assert timeline.wait_past(0, 0.0) is True  # already past: no wait


async def test_one_update_shows_the_intervals_cpu_rows_and_its_dram_reading_that_came_after_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The wait's budget made roomy: on a loaded machine the reading's thread may start late (what the view does
    # when the budget runs out is the test below).
    monkeypatch.setattr(interval_readings, "WAIT_S", 30.0)
    monkeypatch.setattr(interval_readings, "WAIT_SHARE", 30.0)
    app, engine, _, clock = demo_app(cpus=2, e_cores=0, intervals=2, dram=True, model="spr")
    packages = app.package_feed
    assert isinstance(packages, PackageSampler)
    read = packages._read

    def late_read(cpu_samples: list[Sample]) -> object:
        time.sleep(0.05)  # the uncore's reads take a while: the view's update must not go ahead without them
        return read(cpu_samples)

    packages._read = late_read  # type: ignore[method-assign,assignment]
    shown: list[tuple[int, int, str]] = []
    apply = app.apply_update

    def recorded(tasks: object) -> None:
        apply(tasks)  # type: ignore[arg-type]
        shown.append((packages.seq, app._dram_seq, text_of(app.query_one("#dram", Static))))

    app.apply_update = recorded  # type: ignore[method-assign,assignment]
    async with app.run_test(size=WIDE) as pilot:
        packages.start()  # its own thread, as in the live view
        try:
            for _ in range(3):
                before = app.updates
                clock.advance(1.0)
                engine.tick()
                await next_update(app, pilot, before)
        finally:
            packages.stop()
    latest = shown[-3:]
    assert [seq for seq, _, _ in latest] == [3, 4, 5]  # two intervals before the view, then one per interval
    assert all(seq == on_screen for seq, on_screen, _ in latest)
    assert len({text for _, _, text in latest}) == 3  # each update drew its interval's figures


class _Threaded(Timeline[int]):
    @property
    def reading_thread(self) -> bool:
        return True


def test_the_wait_for_an_intervals_reading_gives_up_after_its_budget_and_the_update_goes_ahead() -> None:
    silent, failed, other = _Threaded(), _Threaded(), Timeline[int]()
    failed.failure = "uncore gone"
    t0 = time.monotonic()
    assert interval_readings.wait_for_interval([silent, failed, other], [0, 0, 0], interval=0.2) == [0, 0, 0]
    took = time.monotonic() - t0
    assert 0.04 <= took < 1.0  # a quarter of the 0.2 s interval (0.05 s), not the reading's whole interval
    t0 = time.monotonic()
    threading.Timer(0.02, lambda: silent.append(1.0, 5)).start()
    assert interval_readings.wait_for_interval([silent, other], [0, 0], interval=60.0) == [1, 0]
    assert time.monotonic() - t0 < interval_readings.WAIT_S + 1.0  # it came: no wait for the rest of the budget


async def test_a_plot_redraws_only_the_lines_that_changed() -> None:
    app, *_ = demo_app(cpus=2, e_cores=0, intervals=2)
    async with app.run_test(size=WIDE) as pilot:
        plot = app.query(HistoryPlot).first()
        body = plot.query_one(PlotLines)
        await pilot.pause()
        regions: list[Region] = []
        refresh = body.refresh

        def counted(*given: Region, **kw: object) -> object:
            regions.extend(given or [Region(0, 0, body.size.width, body.size.height)])
            return refresh(*given, **kw)  # type: ignore[arg-type]

        body.refresh = counted  # type: ignore[method-assign,assignment]
        values = [1.0, 1.0, 1.0]
        plot.set_values(values, 1.0)
        await pilot.pause()
        regions.clear()
        plot.set_values(values, 1.0)  # the same picture: nothing to draw
        assert regions == []
        plot.set_values([*values, 1.0], 1.0)  # a new column: only the rows its bar reaches change
        await pilot.pause()
        lines = {y for region in regions for y in range(region.y, region.bottom)}
        height = body.size.height
        assert lines and len(lines) < height  # not the whole plot
        assert all(region.width == body.size.width for region in regions)


def test_a_replay_pushes_the_intervals_dram_reading_before_the_samples_that_wake_the_view(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "run.jsonl"
    record(capsys, path)  # 4 intervals of --demo with its simulated DRAM
    feed = ReplayFeed(read_recording(str(path)), "max")
    try:
        packages = feed.package_feed
        assert packages is not None
        ring = feed.rings[max(feed.rings)]  # the last CPU's sample ends an interval's group
        push = ring.push
        seen_at_push: list[int] = []

        def watched(sample: Sample) -> None:
            seen_at_push.append(packages.seq)
            push(sample)

        ring.push = watched  # type: ignore[method-assign]
        while feed.step():
            pass
        assert seen_at_push == [1, 2, 3, 4]
    finally:
        feed.close()


@pytest.mark.integration
@needs_tmux
def test_in_a_real_terminal_each_plots_now_follows_the_all_row(tmp_path: Path) -> None:
    """What the terminal shows, not a fresh render: the plots' "now · max" is redrawn with every interval (it
    once stayed at the first interval's value while the bars moved on)."""
    tmux = Tmux(tmp_path)
    try:
        cmd = f"{sys.executable} -m pmutop --demo --sim-cpus 2 --interval 0.5"
        tmux("new-session", "-d", "-s", "t", "-x", "120", "-y", "40", cmd)
        tmux.wait_for("now ·", timeout=60)
        shown: list[tuple[str, str]] = []
        deadline = time.monotonic() + 30
        while len({ipc for ipc, _ in shown}) < 3 and time.monotonic() < deadline:
            time.sleep(0.37)
            screen = tmux.screen()
            all_row = next((line.split() for line in screen.splitlines() if line.split()[:1] == ["all"]), None)
            now = re.search(r"([\d.]+) now · [\d.]+ max", screen)
            if all_row and now:
                shown.append((all_row[3], now.group(1)))  # the all row's IPC, the IPC plot's "now"
        assert len({ipc for ipc, _ in shown}) >= 3, shown  # the simulated IPC moves
        # A capture can fall between the table's and the plot's part of one frame: most must agree, each of the
        # later ones too (the plot's "now" never stays behind).
        agree = [ipc == now for ipc, now in shown]
        assert sum(agree) >= len(agree) - 2 and agree[-1], shown
        assert len({now for _, now in shown}) >= 3, shown
    finally:
        tmux.kill()


class _Kept(App[None]):
    def compose(self) -> ComposeResult:
        yield KeptStatic("kept", id="kept")
        yield Static("kept", id="plain")
        yield KeptFooter()


async def test_a_kept_widget_looks_as_its_textual_class_and_draws_a_line_again_only_after_a_change() -> None:
    app = _Kept()
    async with app.run_test(size=(40, 8)) as pilot:
        kept, plain = app.query_one("#kept", KeptStatic), app.query_one("#plain", Static)
        footer = app.query_one(KeptFooter)
        assert (footer.styles.dock, footer.region.height, footer.region.y) == ("bottom", 1, 7)  # Footer's own CSS
        assert kept.styles.height == plain.styles.height  # Static's
        whole = Region(0, 0, 40, 1)
        assert kept.render_lines(whole) == plain.render_lines(whole)
        drawn = 0
        draw = Widget.render_lines

        def counted(widget: Widget, crop: Region) -> list[Strip]:
            nonlocal drawn
            drawn += widget is kept
            return draw(widget, crop)

        with patch.object(Widget, "render_lines", counted):
            for _ in range(3):
                kept.render_lines(whole)  # the screen asks again: nothing changed
            assert drawn == 0
            kept.update("changed")
            plain.update("changed")
            assert kept.render_lines(whole) == plain.render_lines(whole) and drawn == 1
            app.theme = "textual-light" if app.theme != "textual-light" else "nord"  # every colour changes
            await pilot.pause()
            assert kept.render_lines(whole) == plain.render_lines(whole) and drawn == 2


async def test_the_process_view_shows_the_intervals_snapshot_with_its_update_not_a_poll_later() -> None:
    app, engine, sampler, _, clock = task_app(intervals=3)
    read = sampler._read

    def late_read(cpu_samples: list[Sample]) -> object:
        time.sleep(0.05)  # counting the processes takes a while after the CPU samples
        return read(cpu_samples)

    sampler._read = late_read  # type: ignore[method-assign,assignment]
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("4")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, ProcessesScreen)
        shown_at_update: list[tuple[int, int]] = []
        apply = app.apply_update

        def recorded(tasks: object) -> None:
            apply(tasks)  # type: ignore[arg-type]
            shown_at_update.append((sampler.seq, screen._seq))

        app.apply_update = recorded  # type: ignore[method-assign,assignment]
        sampler.start()
        try:
            for _ in range(3):
                before = app.updates
                clock.advance(1.0)
                engine.tick()
                await next_update(app, pilot, before)
        finally:
            sampler.stop()
    engine.stop()
    assert len(shown_at_update) == 3 and all(seq == shown for seq, shown in shown_at_update), shown_at_update
