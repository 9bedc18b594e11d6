"""A recording made with per-process counters replays into the process view (4): the processes recorded with
each interval are on screen, as the live run showed them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from pmutop.app.commands.replay import replay_app
from pmutop.recording.reader import read_recording
from tests.helpers.pilot import screen_text


def _record(path: Path, *options: str) -> list[dict[str, object]]:
    run = [sys.executable, "-m", "pmutop", "--demo", "--sim-cpus", "2", "--batch", "--tasks", *options]
    done = subprocess.run(
        [*run, "--format", "json", "--count", "3", "--interval", "0.2", "--record", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return [r for r in map(json.loads, done.stdout.splitlines()) if r["kind"] == "task"]


async def _views_of_replay(path: Path, keys: tuple[str, ...]) -> dict[str, str]:
    """What each view (its key) shows of a replay of `path`, once the first processes are replayed."""
    app, feed = replay_app(read_recording(str(path)), "max")
    seen: dict[str, str] = {}
    async with app.run_test(size=(160, 50)) as pilot:
        feed.start()
        try:
            for _ in range(100):
                await pilot.pause(0.05)
                if feed.task_feed is not None and feed.task_feed.latest() is not None:
                    break
            for key in keys:
                await pilot.press(key)
                await pilot.pause(0.3)
                seen[key] = screen_text(app)
        finally:
            feed.close()
    return seen


async def test_a_recording_with_processes_replays_into_the_process_view(tmp_path: Path) -> None:
    recorded = _record(tmp_path / "run.jsonl")
    busiest = max(recorded, key=lambda r: r["task_clock"] or 0)
    text = (await _views_of_replay(tmp_path / "run.jsonl", ("4",)))["4"]
    assert "this recording has none" not in text
    assert str(busiest["comm"]) in text and str(busiest["pid"]) in text


async def test_a_recording_with_dram_bandwidth_replays_into_the_memory_view(tmp_path: Path) -> None:
    """The DRAM bandwidth recorded with the intervals reaches the replay's header line and memory view (6)."""
    _record(tmp_path / "run.jsonl")
    rec = read_recording(str(tmp_path / "run.jsonl"))
    app, feed = replay_app(rec, "max")
    assert feed.package_feed is not None
    async with app.run_test(size=(160, 50)) as pilot:
        feed.start()
        try:
            for _ in range(100):
                await pilot.pause(0.05)
                if feed.package_feed.latest() is not None:
                    break
            await pilot.pause(0.5)
            header = screen_text(app)
            await pilot.press("6")
            await pilot.pause(0.3)
            memory = screen_text(app)
        finally:
            feed.close()
    assert "DRAM pkg0" in header and "% of 307 GB/s" in header and "est." not in header.split("DRAM", 1)[1][:60]
    assert "ch0" in memory or "channel" in memory.lower()


async def test_every_replayed_view_says_it_is_a_replay(tmp_path: Path) -> None:
    """The process, cgroup and memory views of a replay carry the REPLAY badge, as the core table's banner does:
    a replayed number must never pass for a live one."""
    _record(tmp_path / "run.jsonl", "--cgroups")
    seen = await _views_of_replay(tmp_path / "run.jsonl", ("4", "5", "6"))
    for key, text in seen.items():
        title = text.splitlines()[0] + "\n" + "\n".join(line for line in text.splitlines()[:6])
        assert "REPLAY" in title, (key, text[:800])
