"""Issue 20, item 14: the replay view. A header-only recording is one line and status 1 in both modes; the
cut-short warning and the END marker stay on screen at 80, 120 and 250 columns; the replay's help lists only
the replay's keys."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.pilot import screen_text, text_of
from test_record import record_demo, run
from textual.widgets import Static

from pmutop.feeds.replay import ReplayFeed
from pmutop.recording.reader import read_recording
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
