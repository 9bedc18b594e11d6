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


def _record(path: Path) -> list[dict[str, object]]:
    run = [sys.executable, "-m", "pmutop", "--demo", "--sim-cpus", "2", "--batch", "--tasks", "--format", "json"]
    done = subprocess.run(
        [*run, "--count", "3", "--interval", "0.2", "--record", str(path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return [r for r in map(json.loads, done.stdout.splitlines()) if r["kind"] == "task"]


async def test_a_recording_with_processes_replays_into_the_process_view(tmp_path: Path) -> None:
    recorded = _record(tmp_path / "run.jsonl")
    busiest = max(recorded, key=lambda r: r["task_clock"] or 0)
    rec = read_recording(str(tmp_path / "run.jsonl"))
    app, feed = replay_app(rec, "max")
    async with app.run_test(size=(160, 50)) as pilot:
        feed.start()
        try:
            for _ in range(100):
                await pilot.pause(0.05)
                if feed.task_feed is not None and feed.task_feed.latest() is not None:
                    break
            await pilot.press("4")
            await pilot.pause(0.3)
            text = screen_text(app)
        finally:
            feed.close()
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
    run = [sys.executable, "-m", "pmutop", "--demo", "--sim-cpus", "2", "--batch", "--tasks", "--cgroups"]
    done = subprocess.run(
        [*run, "--count", "3", "--interval", "0.2", "--record", str(tmp_path / "run.jsonl")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    app, feed = replay_app(read_recording(str(tmp_path / "run.jsonl")), "max")
    seen: dict[str, str] = {}
    async with app.run_test(size=(160, 50)) as pilot:
        feed.start()
        try:
            for _ in range(100):
                await pilot.pause(0.05)
                if feed.task_feed is not None and feed.task_feed.latest() is not None:
                    break
            for key in ("4", "5", "6"):
                await pilot.press(key)
                await pilot.pause(0.3)
                seen[key] = screen_text(app)
        finally:
            feed.close()
    for key, text in seen.items():
        title = text.splitlines()[0] + "\n" + "\n".join(line for line in text.splitlines()[:6])
        assert "REPLAY" in title, (key, text[:800])
