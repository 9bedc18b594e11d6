"""Issue 21's live views: the process view (4, --tasks), the cgroup tree (5, --cgroups), a process's and a
cgroup's detail, a core's processes, and the engine's task sampler that feeds them; driven with Pilot over
the demo engine and a fake per-task source (tests/helpers/fake_tasks.py) read through the real sampler."""

from __future__ import annotations

import argparse
import threading
import time

import pytest
from rich.text import Text
from textual.widgets import DataTable, Static

from pmutop.app.commands.run import start_view
from pmutop.app.screenshots import demo_app
from pmutop.app.task_setup import TaskPlan
from pmutop.core.run_description import RunInfo
from pmutop.core.task_reading import ESTIMATED, SIMULATED, TaskSnapshot
from pmutop.engine.task_sampler import KEEP, TaskSampler
from pmutop.tui.app import PmutopApp
from pmutop.tui.filter import parse_task_filter
from pmutop.tui.screens.cgroups import CgroupsScreen
from pmutop.tui.screens.detail import DetailScreen
from pmutop.tui.screens.processes import ProcessDetailScreen, ProcessesScreen
from pmutop.tui.screens.task_list import POLL_S, mode_marks
from tests.helpers.fake_tasks import FakeTasks, task_app
from tests.helpers.pilot import screen_text, text_of

SIZE = (160, 50)


def rows(app: PmutopApp, table_id: str = "#tl-table") -> list[list[str]]:
    """The table's cells as text, in display order (indentation kept)."""
    table = app.screen.query_one(table_id, DataTable)
    return [
        [Text.assemble(c).plain if isinstance(c, Text) else str(c) for c in table.get_row_at(i)]
        for i in range(table.row_count)
    ]


def headers(app: PmutopApp) -> list[str]:
    table = app.screen.query_one("#tl-table", DataTable)
    return [str(c.label.plain if isinstance(c.label, Text) else c.label) for c in table.ordered_columns]


def title(app: PmutopApp, widget: str = "#tl-title") -> str:
    return text_of(app.screen.query_one(widget, Static)).strip()


# -- the sampler


def test_sampler_reads_once_per_interval_after_the_cpu_samples_and_tells_its_listeners() -> None:
    source = FakeTasks()
    _, engine, _, clock = demo_app(intervals=2, cpus=4, e_cores=0)
    sampler = TaskSampler(source, engine)
    heard: list[tuple[int, float, int]] = []
    sampler.add_listener(lambda index, at, snapshot: heard.append((index, at, len(snapshot.tasks))))
    sampler.start()
    try:
        for n in range(3):
            clock.advance(1.0)
            samples = engine.tick()
            deadline = time.monotonic() + 5
            while sampler.seq < n + 1 and time.monotonic() < deadline:
                time.sleep(0.01)
            assert sampler.seq == n + 1
            # The listener (the recorder) gets the interval as the CPU samples' seq, to pair them in the file.
            assert heard[-1][:2] == (max(s.seq for s in samples), max(s.time for s in samples))
        assert source.begun == 1
        assert source.cpu_samples_seen == [4, 4, 4]  # each read got the interval's CPU samples
    finally:
        t0 = time.monotonic()
        sampler.stop()
        assert time.monotonic() - t0 < 1.0  # the wait ends at once
        engine.stop()
    assert not any(t.name == "pmutop-tasks" for t in threading.enumerate())


def test_sampler_keeps_120_intervals_of_history_per_process_and_cgroup() -> None:
    _, engine, sampler, _, _ = task_app(intervals=130, source=FakeTasks(exit_at=1000))
    try:
        assert sampler.seq == 130
        history = sampler.task_history(1201)
        assert len(history) == KEEP == 120
        assert all(r.pid == 1201 for r in history)
        assert sampler.task_history(1201, start_time=1.0) == []  # the PID reused by another process
        assert len(sampler.cgroup_history("/system.slice")) == 120
        latest = sampler.latest()
        assert latest is not None and latest.tasks[0].comm == "stream"
    finally:
        engine.stop()


def test_sampler_passes_top_n_to_a_source_that_picks_its_processes() -> None:
    class Picking(FakeTasks):
        top: int | None = None

        def set_top(self, n: int) -> None:
            self.top = n

    _, engine, sampler, source, _ = task_app(intervals=1, source=Picking())
    sampler.set_top(8)
    assert source.top is None  # next interval, from the sampler's thread
    sampler.sample_once()
    assert source.top == 8
    engine.stop()


async def test_a_source_that_fails_stops_counting_and_the_view_says_why_in_one_line() -> None:
    source = FakeTasks(fail_at=3)
    app, engine, _, clock = demo_app(intervals=1, cpus=4, e_cores=0)
    sampler = TaskSampler(source, engine)
    app.task_feed = sampler
    sampler.start()
    try:
        for _ in range(3):
            clock.advance(1.0)
            engine.tick()
            time.sleep(0.2)
        assert sampler.failure == "per-task counters stopped: perf_event read failed: No such device"
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("4")
            await pilot.pause()
            assert "per-task counters stopped: perf_event read failed" in title(app, "#tl-notes")
    finally:
        sampler.stop()
        engine.stop()


# -- the process view


async def test_process_view_shows_each_process_top_like() -> None:
    app, engine, _, _, _ = task_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("4")
        await pilot.pause()
        assert isinstance(app.screen, ProcessesScreen)
        assert headers(app)[:4] == ["PID", "User", "Command", "CPU%▼"]
        assert {"GHz", "IPC", "LLC/s", "MPKI", "BrMiss%", "CPUs", "Counted"} <= set(headers(app))
        table = rows(app)
        by_pid = {r[0].strip(): [c.strip() for c in r] for r in table}
        assert table[0][2].startswith("stream (8)")  # busiest first
        stream = by_pid["3310"]
        assert stream[1] == "bob" and stream[headers(app).index("CPUs")] == "8-11"
        assert stream[headers(app).index("IPC")] == "0.38"
        # postgres counted 62% of the time (multiplexed): its scaled values are marked, its Counted shows it.
        postgres = by_pid["1377"]
        assert postgres[headers(app).index("MPKI")].startswith("~")
        assert postgres[headers(app).index("Counted")] == "62"
        assert by_pid["5120"][2] == "gcc (1) exited"
        assert by_pid["811"][2] == "sshd (1) no permission"
        assert by_pid["811"][3:] == [""] * (len(headers(app)) - 4) or by_pid["811"][3] == ""
        assert "Processes   7 counted   sorted by CPU% ▼" in title(app)
        assert "SIMULATED" in title(app)
        # Low IPC and high MPKI in the per-core table's colours.
        cells = app.screen.query_one("#tl-table", DataTable).get_row("3310")
        assert "red" in str(cells[headers(app).index("IPC")].style)
        assert "red" in str(cells[headers(app).index("MPKI")].style)
    engine.stop()


async def test_process_view_estimated_form_says_est_everywhere_and_how_to_get_exact_numbers() -> None:
    app, engine, _, _, _ = task_app(ESTIMATED)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("4")
        await pilot.pause()
        assert "est." in title(app)
        assert {"GHz est.", "IPC est.", "LLC/s est.", "MPKI est."} <= set(headers(app))
        assert "CPU%▼" in headers(app)  # the kernel's CPU time is measured, not estimated
        assert "Counted" not in headers(app)  # no counter ran: nothing to show there
        notes = title(app, "#tl-notes")
        assert "explain 87% of the cores' busy time" in notes and "exact numbers: --backend perf" in notes
    engine.stop()


@pytest.mark.parametrize("key", ["4", "5"], ids=["processes", "cgroups"])
async def test_a_narrow_task_view_says_how_many_columns_do_not_fit(key: str) -> None:
    """At 80 columns the process and cgroup tables drop columns; the title says how many, as the core table's
    status line does, and where to choose them (c)."""
    app, engine, _, _, _ = task_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press(key)
        await pilot.pause()
        shown = len(headers(app))
        every = len(app.screen.columns)  # type: ignore[attr-defined]
        assert shown < every
        assert f"+{every - shown} columns (c)" in title(app)
    engine.stop()
    wide, engine, _, _, _ = task_app()
    async with wide.run_test(size=(250, 40)) as pilot:
        await pilot.press(key)
        await pilot.pause()
        assert "columns (c)" not in title(wide)
    engine.stop()


async def test_sort_reverse_and_home_end_keys_as_in_the_core_table() -> None:
    app, engine, _, _, _ = task_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("4")
        await pilot.pause()
        await pilot.press("s")  # CPU% -> GHz
        await pilot.pause()
        assert "GHz▼" in headers(app)
        assert rows(app)[0][2].startswith("cc1plus")  # 3.6 GHz
        await pilot.press("r")
        await pilot.pause()
        assert "GHz▲" in headers(app)
        assert rows(app)[0][2].startswith("stream")  # 2.4 GHz; rows without a value stay last
        assert rows(app)[-1][2].strip().startswith(("gcc", "sshd"))
        await pilot.press("less_than_sign", "less_than_sign")
        await pilot.pause()
        assert "Command▲" in headers(app) or "Command▼" in headers(app)
        await pilot.press("end")
        table = app.screen.query_one("#tl-table", DataTable)
        assert table.cursor_row == table.row_count - 1
        await pilot.press("home")
        assert table.cursor_row == 0
    engine.stop()


async def test_filter_by_pid_user_command_and_value() -> None:
    app, engine, _, _, _ = task_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("4")
        await pilot.pause()

        async def apply(text: str) -> list[str]:
            await pilot.press("slash", *text, "enter")
            await pilot.pause()
            return sorted(r[0].strip() for r in rows(app))

        assert await apply("comm~post") == ["1377"]
        await pilot.press("backslash")
        assert await apply("user=alice") == ["2230", "5120"]
        await pilot.press("backslash")
        assert await apply("pid=1201") == ["1201"]
        assert "filter: pid=1201" in title(app)
        assert "7 counted, 1 shown" in title(app)
        await pilot.press("backslash")
        assert await apply("ipc<1") == ["1377", "3310"]
        await pilot.press("backslash")
        await pilot.pause()
        assert len(rows(app)) == 7
        await pilot.press("slash", *"bogus", "enter")
        await pilot.pause()
        assert any("cannot filter by 'bogus'" in str(n.message) for n in app._notifications)
    engine.stop()


def test_task_filter_terms() -> None:
    numeric = {"cpu", "ipc", "mpki"}
    f = parse_task_filter("comm ~ NGINX  cpu > 50", numeric)
    assert f is not None and f.texts == (("name", "~", "nginx"),) and f.conditions == (("cpu", ">", 50.0),)
    assert f.matches({"name": "nginx"}, 1, {"cpu": 60.0})
    assert not f.matches({"name": "nginx"}, 1, {"cpu": None})
    assert parse_task_filter("pid=1,7-9", numeric).pids == frozenset({1, 7, 8, 9})  # type: ignore[union-attr]
    assert parse_task_filter("  ", numeric) is None
    bad_terms = (("ghz<2", "cannot filter by 'ghz<2'"), ("pid~3", "pid=PID"), ("pid=1-99999999", "PIDs end at"))
    for bad, message in bad_terms:
        try:
            parse_task_filter(bad, numeric)
        except Exception as e:  # UsageError: one line
            assert message in str(e)
        else:
            raise AssertionError(bad)


async def test_enter_opens_the_process_its_threads_and_history_esc_goes_back() -> None:
    app, engine, _, _, _ = task_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("4")
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, ProcessDetailScreen) and app.screen.pid == 3310
        text = screen_text(app)
        assert "stream (pid 3310, 8 threads)   user bob   cgroup /user.slice/user-1001.slice/session-7.scope" in text
        assert "CPU%" in text and "IPC" in text and "now ·" in text  # the history plots
        threads = rows(app, "#rd-threads")
        assert [r[0].strip() for r in threads] == ["3310", "3311", "3312"]
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, ProcessesScreen)
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is app.screen_stack[0]
    engine.stop()


async def test_the_view_redraws_only_when_the_feed_has_a_new_snapshot() -> None:
    app, engine, sampler, _, clock = task_app(intervals=10)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("4")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, ProcessesScreen)
        drawn: list[int] = []
        original = screen._sync
        screen._sync = lambda table, rows: (drawn.append(1), original(table, rows))  # type: ignore[method-assign]
        for _ in range(3):
            clock.advance(1.0)
            engine.tick()
            app.apply_update(None)  # CPU samples, no new snapshot: nothing to redraw
        await pilot.pause(0.4)
        assert drawn == []
        sampler.sample_once()  # a snapshot with no update of the app: shown within the screen's backstop poll
        await pilot.pause(POLL_S + 0.2)
        assert drawn == [1]
    engine.stop()


# -- the cgroup tree


async def test_cgroup_view_is_a_tree_parents_counting_their_children() -> None:
    app, engine, _, _, _ = task_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("5")
        await pilot.pause()
        assert isinstance(app.screen, CgroupsScreen)
        names = [r[0].rstrip() for r in rows(app)]
        assert names[0] == "system.slice"
        assert "  postgresql.service" in names and "  docker web" in names  # one level down, as users name it
        assert names.index("user.slice") < names.index("  user-1001.slice") < names.index("    session-7.scope")
        procs = {r[0].strip(): r[1].strip() for r in rows(app)}
        assert procs["system.slice"] == "4" and procs["nginx.service"] == "1"
        cpu = headers(app).index("CPU%▼")
        by_name = {r[0].strip(): float(r[cpu]) for r in rows(app) if r[cpu].strip()}
        children = by_name["postgresql.service"] + by_name["nginx.service"] + by_name["docker web"]
        assert abs(by_name["system.slice"] - children) < 0.2  # the parent counts its children
        await pilot.press("enter")  # system.slice: its path and history
        await pilot.pause()
        assert "system.slice   /system.slice   4 processes" in title(app, "#rd-title")
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, CgroupsScreen)
    engine.stop()


# -- a core's processes


async def test_core_detail_lists_its_processes_and_opens_one() -> None:
    app, engine, _, _, _ = task_app()
    async with app.run_test(size=SIZE) as pilot:
        await app.push_screen(DetailScreen(5))
        await pilot.pause()
        shown = [[c.strip() for c in r] for r in rows(app, "#cpu-procs")]
        assert [r[:2] for r in shown] == [["1377", "postgres"], ["4100", "java"]]
        assert sum(float(r[2].rstrip("%")) for r in shown) == 100.0
        await pilot.press("down", "enter")
        await pilot.pause()
        assert isinstance(app.screen, ProcessDetailScreen) and app.screen.pid == 4100
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, DetailScreen)
    engine.stop()


# -- without per-task counters, and at start


async def test_without_a_source_4_and_5_say_in_one_line_why() -> None:
    app, engine, _, _ = demo_app(intervals=3, cpus=4, e_cores=0)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("4")
        await pilot.pause()
        assert title(app, "#tl-notes") == "per-process counters: start with --tasks or --pid"
        await pilot.press("5")
        await pilot.pause()
        assert title(app, "#tl-notes") == "per-cgroup counters: start with --cgroups or --cgroup PATH"
        app.task_note = "not available over --connect"
        await pilot.press("4")
        await pilot.pause()
        assert title(app, "#tl-notes") == "per-process counters: not available over --connect"
    engine.stop()


async def test_tasks_and_cgroups_options_open_on_their_view() -> None:
    assert start_view(argparse.Namespace(tasks=True, cgroups=False), TaskPlan()) == "processes"
    assert start_view(argparse.Namespace(tasks=False, cgroups=False), TaskPlan(pids=[1])) == "processes"
    assert start_view(argparse.Namespace(tasks=False, cgroups=True), TaskPlan()) == "cgroups"
    assert start_view(argparse.Namespace(tasks=False, cgroups=False), TaskPlan(cgroups=["/x"])) == "cgroups"
    assert start_view(argparse.Namespace(tasks=False, cgroups=False), TaskPlan()) is None
    app, engine, _, _, _ = task_app(intervals=3)
    app.start_view = "cgroups"
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, CgroupsScreen)
    engine.stop()


def test_simulated_snapshots_say_simulated_even_on_a_real_machine() -> None:
    marked = Text("Processes")
    mode_marks(
        marked,
        TaskSnapshot(mode=SIMULATED),
        RunInfo("h", "m", None, "p", "perf", "r", simulated=False, hypervisor=False, cpus=[]),
    )
    assert "SIMULATED" in marked.plain
    plain = Text("Processes")
    mode_marks(
        plain, TaskSnapshot(), RunInfo("h", "m", None, "p", "perf", "r", simulated=False, hypervisor=False, cpus=[])
    )
    assert plain.plain == "Processes"


async def test_a_view_with_no_rows_says_what_counts_them() -> None:
    """--tasks alone counts no cgroups: key 5 says so instead of showing an empty tree (and the reverse)."""
    processes_only = FakeTasks()
    processes_only.cgroups_off = True
    app, *_ = task_app(intervals=3, source=processes_only)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.3)
        await pilot.press("5")
        await pilot.pause(0.3)
        assert "no cgroups in the latest interval (cgroups are counted with --cgroups or --cgroup PATH)" in (
            screen_text(app)
        )
