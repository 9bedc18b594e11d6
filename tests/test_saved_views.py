"""A saved view and heatmap metric (config.toml) never stop the live view from starting: every view and metric
that can be saved opens in every mode (this machine, a replay, --connect, --prometheus) before the
first reading has come, saying it waits for it; a saved setting the mode cannot honour falls back (the
table, or a metric this run measures) and says so once. Views 4, 5 and 6 are remembered like 2 and 3."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from textual.pilot import Pilot
from textual.screen import Screen

from pmutop.app.commands.replay import replay_app
from pmutop.app.screenshots import demo_app
from pmutop.app.scripted_tasks import ScriptedTasks
from pmutop.core.task_reading import EXACT
from pmutop.feeds.fleet import FleetFeed
from pmutop.feeds.prometheus import PrometheusFeed
from pmutop.feeds.promql import DEFAULT_MATCH, parse_server
from pmutop.feeds.remote import RemoteFeed, remote_info
from pmutop.recording.reader import read_recording
from pmutop.sinks.exporter import PmuCollector
from pmutop.tui.app import PmutopApp
from pmutop.tui.config import VIEWS, load
from pmutop.tui.fleet_app import FleetApp
from pmutop.tui.heatmap import DRAM_METRICS, METRICS
from pmutop.tui.screens.cgroups import CgroupsScreen
from pmutop.tui.screens.fleet_heatmap import FleetHeatmapScreen
from pmutop.tui.screens.fleet_topdown import FleetTopdownScreen
from pmutop.tui.screens.heatmap import HeatmapScreen
from pmutop.tui.screens.memory import MemoryScreen
from pmutop.tui.screens.processes import ProcessesScreen
from pmutop.tui.screens.topdown import TopdownScreen
from tests.helpers.fake_prometheus import FakePrometheus
from tests.helpers.flags import needs_tmux
from tests.helpers.pilot import screen_text
from tests.helpers.serve import ROOT
from tests.test_tmux import Tmux

WAITING = "waiting for the first reading"
# "prometheus": `pmutop --prometheus URL --record FILE`, the per-CPU live view over Prometheus.
MODES = ("local", "replay", "connect", "fleet", "prometheus")
SCREENS: dict[str, type[Screen[None]]] = {
    "topdown": TopdownScreen,
    "heatmap": HeatmapScreen,
    "processes": ProcessesScreen,
    "cgroups": CgroupsScreen,
    "memory": MemoryScreen,
}
FLEET_SCREENS: dict[str, type[Screen[None]]] = {"topdown": FleetTopdownScreen, "heatmap": FleetHeatmapScreen}
# What each mode cannot show: no per-task counters over --connect or --prometheus, no DRAM bandwidth source there.
NO_TASKS = {"connect", "fleet", "prometheus"}
NO_DRAM = {"connect", "fleet", "prometheus"}
SAVED = [(view, None) for view in VIEWS if view != "heatmap"] + [("heatmap", m.key) for m in (*METRICS, *DRAM_METRICS)]


def case_id(mode: str, view: str, metric: str | None) -> str:
    return "-".join(p for p in (mode, view, metric) if p)


CASES = [pytest.param(mode, view, metric, id=case_id(mode, view, metric)) for mode in MODES for view, metric in SAVED]


# -- one app per mode, none of them with a reading yet


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A short recording of the simulated PMU with per-process counters and DRAM bandwidth."""
    path = tmp_path_factory.mktemp("rec") / "run.jsonl"
    run = [sys.executable, "-m", "pmutop", "--demo", "--sim-cpus", "2", "--batch", "--tasks", "--format", "json"]
    done = subprocess.run(
        [*run, "--count", "2", "--interval", "0.2", "--record", str(path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return path


@pytest.fixture(scope="module")
def prometheus() -> Iterator[FakePrometheus]:
    with FakePrometheus(hosts=3, cpus=2, spread=True) as fake:
        yield fake


def exporter_text() -> str:
    """What `pmutop serve --demo` serves (its collector over a simulated engine): the same every scrape, so a
    remote feed over it never has a sample (a sample is the difference of two scrapes)."""
    app, engine, _, _ = demo_app(intervals=2, cpus=2, e_cores=0)
    collector = PmuCollector(engine, app.info)
    collector.fold()
    registry = CollectorRegistry()
    registry.register(collector)
    engine.stop()
    return generate_latest(registry).decode()


@contextlib.contextmanager
def app_before_the_first_reading(
    mode: str, recording: Path, fake: FakePrometheus, tasks: bool = True
) -> Iterator[PmutopApp]:
    """The live view of `mode` whose feed has delivered nothing yet (and will not while the test runs)."""
    if mode == "local":
        source = ScriptedTasks(EXACT) if tasks else None
        app, engine, _, _ = demo_app(intervals=0, cpus=4, e_cores=0, dram=True, task_source=source)
        try:
            yield app
        finally:
            engine.stop()
    elif mode == "replay":
        app, feed = replay_app(read_recording(str(recording)), "max")  # not started: no interval replayed yet
        try:
            yield app
        finally:
            feed.close()
    elif mode == "connect":
        text = exporter_text()
        remote = RemoteFeed(["http://127.0.0.1:9"], 1.0, fetch_text=lambda url: text)
        yield PmutopApp(remote, remote_info(remote))
    elif mode == "prometheus":
        per_cpu = PrometheusFeed(parse_server(fake.url), 1.0, DEFAULT_MATCH)  # not prefilled, not polled
        try:
            yield PmutopApp(per_cpu, per_cpu.run_info())
        finally:
            per_cpu.stop()
    else:
        fleet = FleetFeed(parse_server(fake.url), 1.0, DEFAULT_MATCH)  # not prefilled, not polled
        try:
            yield FleetApp(fleet, fleet.run_info())
        finally:
            fleet.stop()


def save(app: PmutopApp, path: Path, view: str, metric: str | None) -> None:
    """The settings as read from config.toml at `path` (the app keeps its own Settings object: the per-core
    table shares it)."""
    path.write_text(f'view = "{view}"\n' + (f'heatmap_metric = "{metric}"\n' if metric else ""))
    saved, problem = load(path)
    assert problem is None
    for name in ("view", "heatmap_metric"):
        setattr(app.settings, name, getattr(saved, name))
    app.settings_path = path


@contextlib.asynccontextmanager
async def started(app: PmutopApp, size: tuple[int, int] = (160, 40)) -> AsyncIterator[tuple[Pilot[int], list[str]]]:
    """Run `app`; yields its pilot and the notifications it shows (a list that grows)."""
    shown: list[str] = []
    notify = app.notify

    def noting(message: str, **kw: object) -> None:
        shown.append(message)
        notify(message, **kw)  # type: ignore[arg-type]

    app.notify = noting  # type: ignore[method-assign]
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        await pilot.pause()
        yield pilot, shown
        assert app.failure is None, app.failure
    assert app.failure is None, app.failure


def expected_screen(mode: str, view: str, metric: str | None) -> type[Screen[None]] | None:
    """The view that must show, None: the table (a fallback included)."""
    if view == "table" or (view in ("processes", "cgroups") and mode in NO_TASKS):
        return None
    return FLEET_SCREENS.get(view, SCREENS[view]) if mode == "fleet" else SCREENS[view]


@pytest.mark.parametrize(("mode", "view", "metric"), CASES)
async def test_every_saved_view_and_metric_starts_before_the_first_reading(
    mode: str,
    view: str,
    metric: str | None,
    recording: Path,
    prometheus: FakePrometheus,
    tmp_path: Path,
) -> None:
    with app_before_the_first_reading(mode, recording, prometheus) as app:
        save(app, tmp_path / "config.toml", view, metric)
        async with started(app) as (_pilot, notes):
            want = expected_screen(mode, view, metric)
            if want is None:
                assert app.screen is app.screen_stack[0], type(app.screen).__name__
            else:
                assert type(app.screen) is want
            text = screen_text(app)
            fell_back = (view in ("processes", "cgroups") and mode in NO_TASKS) or (
                metric in ("dram_read", "dram_write") and mode in NO_DRAM
            )
            if fell_back:  # said once, in one line that names what was saved
                assert len(notes) == 1, notes
                assert "saved" in notes[0] and ("showing the table" in notes[0] or "showing IPC" in notes[0])
                if view != "heatmap":  # why, in this mode's words
                    assert ("over --connect" if mode == "connect" else "over --prometheus") in notes[0]
            else:
                assert notes == []
            if view in ("topdown", "heatmap", "processes", "cgroups") and not fell_back:
                assert WAITING in text
            if view == "memory" and mode not in NO_DRAM:
                assert WAITING in text
            if view == "heatmap":
                assert isinstance(app.screen, HeatmapScreen)
                assert app.screen.metric.key == (metric if not fell_back else "ipc")
        # A fallback is not saved over the setting: the next run in a mode that can show it opens it again.
        assert load(tmp_path / "config.toml")[0].view == view


# -- views 4, 5, 6 are remembered; a run that cannot show one says so and opens on the table


@pytest.mark.parametrize(("key", "view"), [("4", "processes"), ("5", "cgroups"), ("6", "memory")])
async def test_views_4_5_and_6_are_saved_and_come_back(key: str, view: str, tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    for run in range(2):
        app, engine, _, _ = demo_app(intervals=3, cpus=4, e_cores=0, dram=True, task_source=ScriptedTasks(EXACT))
        app.settings, _ = load(path)
        app.core_table.settings = app.settings
        app.settings_path = path
        try:
            async with started(app) as (pilot, notes):
                if run == 0:
                    await pilot.press(key)
                    await pilot.pause()
                assert type(app.screen) is SCREENS[view]
                assert notes == []
        finally:
            engine.stop()
        assert load(path)[0].view == view


@pytest.mark.parametrize("view", ["processes", "cgroups"])
async def test_a_saved_task_view_without_task_counters_opens_the_table_and_says_why(
    view: str, recording: Path, prometheus: FakePrometheus, tmp_path: Path
) -> None:
    with app_before_the_first_reading("local", recording, prometheus, tasks=False) as app:
        save(app, tmp_path / "config.toml", view, None)
        async with started(app) as (_pilot, notes):
            assert app.screen is app.screen_stack[0]
            what = "per-process" if view == "processes" else "per-cgroup"
            how = "--tasks" if view == "processes" else "--cgroups"
            assert len(notes) == 1 and what in notes[0] and how in notes[0] and "showing the table" in notes[0]
            # Selecting the view still shows it, with the same reason.
            await app.run_action(f"view('{view}')")
            assert isinstance(app.screen, SCREENS[view])
            assert how in screen_text(app)


@pytest.mark.parametrize("metric", ["dram_read", "dram_write", "ipc"])
async def test_3_pressed_before_the_first_reading_opens_the_heatmap_waiting(metric: str, tmp_path: Path) -> None:
    app, engine, _, clock = demo_app(intervals=0, cpus=4, e_cores=0, dram=True)
    try:
        save(app, tmp_path / "config.toml", "table", metric)
        async with started(app) as (pilot, notes):
            await app.run_action("view('heatmap')")
            screen = app.screen
            assert isinstance(screen, HeatmapScreen) and screen.metric.key == metric
            assert WAITING in screen_text(app) and notes == []
            clock.advance(1.0)
            app.package_feed.sample_once(engine.tick())  # type: ignore[union-attr]
            app.apply_update(None)
            await pilot.pause()
            assert WAITING not in screen_text(app)
            assert ("pkg0" if metric.startswith("dram") else "all") in screen_text(app)  # its rows
    finally:
        engine.stop()
    assert load(tmp_path / "config.toml")[0].view == "heatmap"


# -- the saved metric waits for the first reading; one that reading shows is not measured falls back once


async def test_a_saved_metric_the_first_readings_do_not_measure_falls_back_to_ipc_once(tmp_path: Path) -> None:
    app, engine, _, clock = demo_app(intervals=0, cpus=4, e_cores=0, model="skx")  # Skylake: no top-down here
    try:
        save(app, tmp_path / "config.toml", "heatmap", "tma_retiring")
        async with started(app) as (pilot, notes):
            screen = app.screen
            assert isinstance(screen, HeatmapScreen) and screen.metric.key == "tma_retiring"
            assert WAITING in screen_text(app) and notes == []
            for _ in range(3):
                clock.advance(1.0)
                engine.tick()
                app.apply_update(None)
                await pilot.pause()
            assert screen.metric.key == "ipc"
            assert notes == ["heatmap: the saved metric Retiring is not measured here; showing IPC"]
            assert WAITING not in screen_text(app)
    finally:
        engine.stop()
    assert load(tmp_path / "config.toml")[0].heatmap_metric == "tma_retiring"


async def test_a_saved_metric_the_first_readings_measure_stays(tmp_path: Path) -> None:
    app, engine, _, clock = demo_app(intervals=0, cpus=4, e_cores=0, model="adl")
    try:
        save(app, tmp_path / "config.toml", "heatmap", "pkg_watts")
        async with started(app) as (pilot, notes):
            clock.advance(1.0)
            engine.tick()
            app.apply_update(None)
            await pilot.pause()
            screen = app.screen
            assert isinstance(screen, HeatmapScreen) and screen.metric.key == "pkg_watts"
            assert notes == [] and WAITING not in screen_text(app)
    finally:
        engine.stop()


async def test_an_unknown_saved_metric_falls_back_to_ipc_and_says_so(tmp_path: Path) -> None:
    app, engine, _, _ = demo_app(intervals=0, cpus=4, e_cores=0)
    try:
        save(app, tmp_path / "config.toml", "heatmap", "no_such_metric")
        async with started(app) as (_pilot, notes):
            assert isinstance(app.screen, HeatmapScreen) and app.screen.metric.key == "ipc"
            assert notes == ["heatmap: the saved metric no_such_metric is not measured here; showing IPC"]
    finally:
        engine.stop()


# -- a view the app hands an interval before the view has mounted


@pytest.mark.parametrize("view", ["topdown", "heatmap", "processes", "cgroups", "memory"])
async def test_an_interval_that_comes_while_a_view_mounts_waits_for_it(view: str) -> None:
    """The sample watcher's update can reach the app between a view's push and its mount (at 256 CPUs the
    mount takes longer than an interval): the view draws once mounted, nothing breaks."""
    app, engine, _, clock = demo_app(intervals=2, cpus=4, e_cores=0, model="adl")
    try:
        async with started(app) as (pilot, notes):
            mounting = app.push_screen(SCREENS[view]())
            clock.advance(1.0)
            engine.tick()
            app.apply_update(None)
            await mounting
            await pilot.pause()
            assert type(app.screen) is SCREENS[view] and notes == []
    finally:
        engine.stop()


# -- for real: the user's keys, then the next start


@pytest.mark.integration
@needs_tmux
def test_quitting_from_the_dram_heatmap_lets_the_next_start_open_it(tmp_path: Path) -> None:
    """`pmutop --demo`, 3, m, End (DRAM write, the chooser's last), Enter, q; then `pmutop --demo` again, in a
    terminal, with its own config directory: the second run opens on that heatmap and quits with status 0."""
    tmux = Tmux(tmp_path)
    env = f"XDG_CONFIG_HOME={tmp_path / 'config'} PYTHONPATH={ROOT}"
    status = [tmp_path / "status1", tmp_path / "status2"]
    try:
        for run, path in enumerate(status):
            cmd = f"{env} {sys.executable} -m pmutop --demo --sim-cpus 4; echo $? > {path}; sleep 60"
            tmux("new-session", "-d", "-s", "t", "-x", "120", "-y", "30", cmd)
            if run == 0:
                tmux.wait_for("Top-down")  # the table's footer: the app is up
                for key in ("3", "m", "End", "Enter"):
                    tmux("send-keys", "-t", "t", key)
                    time.sleep(0.3)
            tmux.wait_for("Heatmap: DRAM write per package")
            tmux("send-keys", "-t", "t", "q")
            deadline = time.monotonic() + 30
            while not path.exists() or not path.read_text().strip():
                assert time.monotonic() < deadline, tmux.screen()
                time.sleep(0.1)
            assert path.read_text().strip() == "0", tmux.screen()
            tmux("kill-session", "-t", "t")
    finally:
        tmux.kill()
    saved = (tmp_path / "config" / "pmutop" / "config.toml").read_text()
    assert 'view = "heatmap"' in saved and 'heatmap_metric = "dram_write"' in saved
