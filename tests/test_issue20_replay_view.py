"""Issue 20, item 14: the replay view. A header-only recording is one line and status 1 in both modes; the
cut-short warning and the END marker stay on screen at 80, 120 and 250 columns; the replay's help lists only
the replay's keys."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest
from helpers.pilot import screen_text, text_of
from test_record import record_demo, run
from textual.pilot import Pilot
from textual.widgets import DataTable, Static

from pmutop.app.live_view import SharedTasks
from pmutop.feeds.replay import ReplayFeed
from pmutop.probes.tasks import TopTask
from pmutop.recording.index import line_key
from pmutop.recording.reader import read_recording
from pmutop.sinks.recorder import Recorder
from pmutop.tui.replay_controls import ReplayApp


def header_only(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> Path:
    full = tmp_path / "full.jsonl"
    record_demo(capsys, full, 2)
    path = tmp_path / "empty.jsonl"
    path.write_text(full.read_text().splitlines()[0] + "\n")
    return path


@pytest.mark.parametrize("mode", ["csv", "json", "table", "live"])
def test_a_header_only_recording_is_one_line_and_status_1_in_every_mode(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    path = header_only(capsys, tmp_path)
    monkeypatch.setattr("pmutop.app.commands.replay.has_terminal", lambda: True)
    args = ["replay", str(path)] + ([] if mode == "live" else ["--batch", "--format", mode])
    code, out, err = run(capsys, *args)
    assert code == 1
    assert out == ""  # not even a CSV header: nothing was recorded
    assert err == f"pmutop: {path}: the recording holds no samples (it was stopped before its first interval)\n"


def write_cut_short(capsys: pytest.CaptureFixture[str], tmp_path: Path, count: int = 6) -> Path:
    path = tmp_path / "cut.jsonl"
    record_demo(capsys, path, count)
    text = path.read_text()
    path.write_text(text[:-40])  # the recorder was killed in the middle of its last line
    return path


async def replay_to_the_end(path: Path, size: tuple[int, int]) -> tuple[str, str]:
    """The status line as shown at `size` once the replay has reached its end, and the whole screen."""
    rec = read_recording(str(path))
    feed = ReplayFeed(rec)
    app = ReplayApp(feed, rec.header.run_info())
    try:
        async with app.run_test(size=size) as pilot:
            while feed.step():
                pass
            feed.index.wait()
            for _ in range(200):
                await pilot.pause(0.02)
                if app.updates and "END" in screen_text(app):
                    break
            app._refresh_header()
            await pilot.pause(0.05)
            lines = screen_text(app).splitlines()
            status = next(line for line in lines if "END" in line or "speed" in line)
            return status, "\n".join(lines)
    finally:
        feed.close()


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (250, 70)])
async def test_end_and_the_cut_short_warning_stay_on_screen(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, size: tuple[int, int]
) -> None:
    path = write_cut_short(capsys, tmp_path)
    status, _ = await replay_to_the_end(path, size)
    assert "END" in status
    assert "last line cut short" in status  # the warning the TUI used to wipe, whole


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (250, 70)])
async def test_end_is_on_screen_when_the_replay_ends(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, size: tuple[int, int]
) -> None:
    path = tmp_path / "r.jsonl.gz"
    record_demo(capsys, path, 4)
    status, _ = await replay_to_the_end(path, size)
    assert "END" in status and "cut short" not in status


async def test_the_replay_help_lists_only_the_replay_keys(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    record_demo(capsys, path, 3)
    rec = read_recording(str(path))
    feed = ReplayFeed(rec)
    app = ReplayApp(feed, rec.header.run_info())
    try:
        async with app.run_test(size=(120, 60)) as pilot:
            await pilot.press("question_mark")
            await pilot.pause(0.1)
            shown = text_of(app.screen.query_one("#help-text", Static)) + text_of(
                app.screen.query_one("#replay-help", Static)
            )
            assert "back / forward 10 intervals" in shown and "go to a time" in shown and "next speed" in shown
            assert "PMU is restored" not in shown
            assert "+ / -" not in shown and "interval" not in shown.replace("10 intervals", "")
            assert "pause / resume the replay" in shown
    finally:
        feed.close()


class CountingTasks:
    """A task source like the live view's: each call is a new lookup."""

    def __init__(self) -> None:
        self.calls = 0

    def top_per_cpu(self) -> dict[int, TopTask]:
        self.calls += 1
        # cpu 2 runs nothing (the lookup found no task there); cpu 0's task changes with the interval
        return {0: TopTask(f"make{self.calls}", 1000 + self.calls, 0.025), 1: TopTask("postgres", 77, 0.05)}


def record_with_tasks(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> tuple[Path, Path, CountingTasks]:
    """A recording made without tasks (as older pmutops wrote), and the same run recorded again with a task
    source, interval by interval, as the recorder does behind the live view."""
    old = tmp_path / "old.jsonl"
    record_demo(capsys, old, 6)
    # As an older pmutop wrote it: no task beside the samples (today's recorder writes the demo's tasks).
    lines = [json.loads(line) for line in old.read_text().splitlines()]
    lines = [line for line in lines if "packages" not in line]  # nor DRAM readings (issue 22)
    lines[0]["dram"] = None
    old.write_text("".join(json.dumps({k: v for k, v in line.items() if k != "task"}) + "\n" for line in lines))
    rec = read_recording(str(old))
    feed = ReplayFeed(rec)
    tasks = CountingTasks()
    new = tmp_path / "tasks.jsonl.gz"
    recorder = Recorder(str(new), feed, rec.header, tasks=tasks)
    try:
        while feed.step():
            recorder.drain()
    finally:
        assert recorder.close() is None
        feed.close()
    return old, new, tasks


def test_the_recorder_writes_each_cpus_top_task_once_per_interval(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    _, new, tasks = record_with_tasks(capsys, tmp_path)
    assert tasks.calls == 6  # one lookup per interval
    lines = [json.loads(line) for line in gzip.decompress(new.read_bytes()).splitlines()[1:]]
    assert len(lines) == 6 * 3
    by = {(line["sample"]["cpu"], line["sample"]["seq"]): line["task"] for line in lines}
    assert by[(0, 4)] == {"name": "make4", "pid": 1004, "cpu_seconds": 0.025}
    assert by[(1, 4)] == {"name": "postgres", "pid": 77, "cpu_seconds": 0.05}
    assert by[(2, 4)] is None  # looked up, nothing there
    # What an older pmutop reads of such a line: the sample, the new key skipped (no format version bump).
    assert (
        read_recording(str(new)).intervals()[3][0].counts
        == read_recording(str(tmp_path / "old.jsonl")).intervals()[3][0].counts
    )
    assert line_key(gzip.decompress(new.read_bytes()).splitlines()[4]) is not None  # the index reads it fast


@pytest.mark.parametrize("fmt", ["csv", "json", "table"])
def test_replay_batch_prints_the_same_with_or_without_tasks(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, fmt: str
) -> None:
    old, new, _ = record_with_tasks(capsys, tmp_path)
    code, without, _ = run(capsys, "replay", str(old), "--batch", "--format", fmt)
    assert code == 0
    code, with_tasks, _ = run(capsys, "replay", str(new), "--batch", "--format", fmt)
    assert code == 0
    assert with_tasks == without and without


async def wait_for_update(app: ReplayApp, pilot: Pilot[int], before: int) -> None:
    for _ in range(300):
        if app.updates > before:
            return
        await pilot.pause(0.02)


async def test_the_replay_shows_the_recorded_top_task_in_the_table_and_the_detail_view(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    old, new, _ = record_with_tasks(capsys, tmp_path)
    rec = read_recording(str(new))
    feed = ReplayFeed(rec)
    app = ReplayApp(feed, rec.header.run_info(), tasks=feed)
    try:
        async with app.run_test(size=(200, 50)) as pilot:
            for _ in range(3):
                before = app.updates
                feed.step()
                await wait_for_update(app, pilot, before)
            table = app.query_one("#cores", DataTable)
            assert table.get_cell("0", "task").plain.split() == ["make3", "1003"]
            assert table.get_cell("1", "task").plain.split() == ["postgres", "77"]
            assert table.get_cell("2", "task").plain.strip() == ""
            await pilot.press("right_square_bracket")  # a seek shows the task recorded where it lands
            await pilot.pause(0.05)
            assert table.get_cell("0", "task").plain.split() == ["make6", "1006"]
            await pilot.press("enter")  # the first row: cpu 0
            await pilot.pause(0.1)
            title = text_of(app.screen.query_one("#detail-title", Static))
            # 0.025 s of CPU time in the demo's 0.05 s intervals (they last a little longer)
            found = re.search(r"top task make6 \(pid 1006, (\d+)% CPU\)", title)
            assert found is not None and 40 <= int(found[1]) <= 60, title
    finally:
        feed.close()

    rec = read_recording(str(old))  # a recording without tasks: the column stays empty, as before
    feed = ReplayFeed(rec)
    app = ReplayApp(feed, rec.header.run_info(), tasks=feed)
    try:
        async with app.run_test(size=(200, 50)) as pilot:
            before = app.updates
            feed.step()
            await wait_for_update(app, pilot, before)
            table = app.query_one("#cores", DataTable)
            assert all(table.get_cell(str(cpu), "task").plain.strip() == "" for cpu in (0, 1, 2))
    finally:
        feed.close()


def test_the_live_view_and_the_recorder_share_one_lookup_per_interval(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "r.jsonl"
    record_demo(capsys, path, 3)
    feed = ReplayFeed(read_recording(str(path)))
    source = CountingTasks()
    shared = SharedTasks(source, feed)
    try:
        feed.step()
        first = shared.top_per_cpu()  # the live view's watcher
        assert shared.top_per_cpu() == first  # the recorder, for the same interval
        assert source.calls == 1
        feed.step()
        assert shared.top_per_cpu()[0].name == "make2" and source.calls == 2
    finally:
        feed.close()
