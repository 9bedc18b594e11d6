"""Issue 24: pmutop shows its own cost, its CPU % and RSS in the live view's status line, and in --batch a
line on stderr with its CPU time and peak RSS after the last interval."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.flags import needs_tmux
from helpers.pilot import text_of
from textual.widgets import Static

from pmutop.app.screenshots import demo_app
from pmutop.core.own_cost import ProcessCost
from tests.test_tmux import Tmux

REPO = Path(__file__).resolve().parents[1]
STATUS_COST = re.compile(r"pmutop (\d+\.\d)% CPU (\d+) MiB")
FINAL = re.compile(
    r"^pmutop: own cost: (\d+\.\d\d) s CPU in (\d+\.\d) s \((\d+\.\d)% of one core\), peak RSS (\d+) MiB$"
)


def test_the_cost_is_cpu_time_over_wall_time_since_the_last_look_and_repeats_within_the_period() -> None:
    wall, cpu = [100.0], [5.0]
    meter = ProcessCost(period=0.9, clock=lambda: wall[0], cpu_clock=lambda: cpu[0], rss=lambda: 48 * 2**20)
    assert meter.text() is None  # nothing measured yet: nothing shown
    wall[0], cpu[0] = 101.0, 5.009
    assert meter.text() == "pmutop 0.9% CPU 48 MiB"
    wall[0], cpu[0] = 101.5, 6.0  # within the period: the last figure, not a half-interval one
    assert meter.text() == "pmutop 0.9% CPU 48 MiB"
    wall[0] = 103.0  # 0.991 s of CPU over 2 s
    assert meter.text() == "pmutop 49.5% CPU 48 MiB"


async def test_the_status_line_shows_pmutops_own_cpu_and_memory() -> None:
    app, engine, _, _ = demo_app(cpus=4, e_cores=0, intervals=3)
    app.own_cost = ProcessCost(period=0.0)  # as the live view's: this process's real figures
    async with app.run_test(size=(160, 40)) as pilot:
        time.sleep(0.05)  # some wall time for a CPU share
        app._draw_header()
        await pilot.pause()
        status = text_of(app.query_one("#status", Static))
    engine.stop()
    found = STATUS_COST.search(status)
    assert found, status
    percent, rss_mib = float(found[1]), int(found[2])
    assert 0.0 <= percent <= 100.0 * (os.cpu_count() or 1)
    assert 10 <= rss_mib <= 4000  # a Python process with Textual: tens to hundreds of MiB
    assert status.index("sort ") < status.index("pmutop ")  # after the sort, which matters more


async def test_without_a_meter_the_status_line_has_no_cost_so_screenshots_stay_the_same() -> None:
    app, engine, _, _ = demo_app(cpus=4, e_cores=0, intervals=3)
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot.pause()
        status = text_of(app.query_one("#status", Static))
    engine.stop()
    assert "sort " in status and not STATUS_COST.search(status)


@pytest.mark.integration
def test_batch_ends_with_its_own_cpu_time_and_peak_rss_on_stderr() -> None:
    cmd = [sys.executable, "-m", "pmutop", "--demo", "--sim-cpus", "2", "--batch", "--count", "3", "--interval", "0.2"]
    t0 = time.monotonic()
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=REPO)
    wall = time.monotonic() - t0
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr
    assert len([line for line in run.stdout.splitlines() if " all " in f" {line} "]) == 3  # the data, unchanged
    last = run.stderr.splitlines()[-1]
    found = FINAL.match(last)
    assert found, last
    cpu_s, life_s, share, rss_mib = float(found[1]), float(found[2]), float(found[3]), int(found[4])
    assert 0.0 < cpu_s <= life_s * (os.cpu_count() or 1)
    assert 0.4 <= life_s <= wall + 0.5  # three 0.2 s intervals at least; no longer than the run took
    assert share == pytest.approx(100 * cpu_s / life_s, rel=0.1, abs=1.0)  # of the rounded figures
    assert 10 <= rss_mib <= 4000


@pytest.mark.integration
@needs_tmux
def test_the_live_view_in_a_140_column_terminal_shows_its_own_cost_last(tmp_path: Path) -> None:
    tmux = Tmux(tmp_path)
    try:
        command = f"{sys.executable} -m pmutop --demo --sim-cpus 2 --interval 0.5"
        tmux(
            "new-session",
            "-d",
            "-s",
            "t",
            "-x",
            "140",
            "-y",
            "24",
            f"cd {REPO} && env -u COLUMNS -u LINES XDG_CONFIG_HOME={tmp_path} {command}",  # the pane's size
        )
        tmux.wait_for("% CPU ", timeout=60)
        screen = tmux.screen()
        status = next(line for line in screen.splitlines() if "interval 0.5 s" in line)
        found = STATUS_COST.search(status)
        assert found, screen
        # Last on the line: on a narrow terminal it is cut before the sort or a filter the user typed.
        assert status.index("sort ") < status.index("% CPU")
        assert 10 <= int(found[2]) <= 4000
        tmux("send-keys", "-t", "t", "q")
    finally:
        tmux.kill()
